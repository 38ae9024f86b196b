#!/usr/bin/env python3
"""tau2-bench runs of gpt-4.1 and of Sierra's SFT fine-tune of it (1 trial, test tasks of airline,
retail, telecom and telecom no-user), kept in src/experiments/model_training/results/ on the
feature/gym branch. Converted like tau2_bench.py (which this reuses, from the same directory),
restricted to that folder so the official results in the same commit are not counted twice.

usage: tau2_bench_sft.py --git-dir GITDIR --commit SHA --source NAME --out FILE.jsonl
"""
import os
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tau2_bench  # noqa: E402

if __name__ == "__main__":
    tau2_bench.main(only_under="src/experiments/model_training/results/")
