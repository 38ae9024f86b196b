#!/usr/bin/env python3
"""AgentDojo prompt-injection runs (every runs/<pipeline>/<suite>/<user_task>/<attack>/<injection>.json
except none/none.json), converted like agentdojo.py (which this reuses, from the same directory).
success is the run's `utility`: whether the user's task was done despite the injection.

usage: agentdojo_attacks.py --git-dir GITDIR --commit SHA --source NAME --out FILE.jsonl
"""
import os
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agentdojo  # noqa: E402

if __name__ == "__main__":
    agentdojo.main(default_runs="attacks")
