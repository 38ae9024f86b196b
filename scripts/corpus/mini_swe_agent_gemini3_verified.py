#!/usr/bin/env python3
"""Converts the mini-SWE-agent run on SWE-bench Verified kept in gruckion/mini-swe-agent
(swebench_results/20251118_gemini-3-pro-74pct: mini-SWE-agent 1.15.0 with Gemini 3 Pro Preview,
the bash-only leaderboard run 20251118_mini-v1.15.0_gemini-3-pro-preview-20251118, 500 tasks)
into OpenAI Chat Completions conversations, one per line.

usage: mini_swe_agent_gemini3_verified.py --git-dir GITDIR --commit SHA --source NAME --out FILE.jsonl

Reads git objects only. Run files: every */trajs/<instance>/<instance>.traj.json under
swebench_results/ (mini-SWE-agent trajectory_format "mini-swe-agent-1": {"info", "messages"}).

success: the sb-cli report in trajs/sb-cli-reports/*.json (SWE-bench's own evaluation of the
submission): true if in "resolved_ids", false if in "unresolved_ids"; an instance in neither
falls back to logs/<instance>/report.json "resolved"; otherwise null.

Messages: "messages" in order. mini-SWE-agent acts by text: each assistant reply must hold
exactly one ```bash block. A reply with exactly one such block becomes an assistant message
whose content is the reply with that block removed (the THOUGHT text) and one tool call
bash {"command": "<the block's command, as the agent's regex extracts it>"}; the next user
message (the <returncode>/<output> observation, a timeout notice, or on submission the
submitted diff) becomes the tool message answering it. A reply with zero or several blocks
(rejected by the agent) stays a plain assistant message and the format-error reply that
follows stays a user message. tools: "bash" (one string parameter "command").
"""
import json
import re
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ beside the scripts
import corpus_common as cc  # noqa: E402
from corpus_common import Malformed  # noqa: E402

# The action regex of mini-SWE-agent 1.x (DefaultAgent.parse_action).
ACTION_RE = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)

BASH_TOOL = cc.command_tool(
    "bash", "Run one bash command (or several joined with && or ||) in a fresh subshell in the repository.",
    "The command")


def convert(messages):
    out = []
    pending = None
    n = 0
    for m in messages:
        role = m.get("role")
        content = cc.text_of(m.get("content"))
        if role == "system":
            out.append({"role": "system", "content": content})
        elif role == "user":
            if pending is not None:
                out.append({"role": "tool", "content": content if content is not None else "", "tool_call_id": pending})
                pending = None
            else:
                out.append({"role": "user", "content": content})
        elif role == "assistant":
            if pending is not None:
                raise Malformed("assistant reply after an unanswered action")
            blocks = list(ACTION_RE.finditer(content or ""))
            if len(blocks) == 1:
                b = blocks[0]
                n += 1
                cid = f"call_{n}"
                thought = (content[:b.start()] + content[b.end():]).strip()
                out.append({"role": "assistant", "content": thought,
                            "tool_calls": [cc.tool_call(cid, "bash", json.dumps({"command": b.group(1).strip()},
                                                                                ensure_ascii=False))]})
                pending = cid
            else:
                out.append({"role": "assistant", "content": content})
        else:
            raise Malformed(f"unknown role {role!r}")
    return cc.check_assistant(out)


def main():
    a = cc.arg_parser().parse_args()

    names = cc.file_names(a.git_dir, a.commit, "swebench_results")
    runs = cc.run_dirs(names, ".traj.json")
    with cc.Output(a) as out:
        for run_dir in runs:
            lab = {}
            for p in names:
                if p.startswith(run_dir + "/logs/") and p.endswith("/report.json"):
                    data = cc.blob_or_none(a.git_dir, a.commit, p)
                    d = json.loads(data) if data else {}
                    if isinstance(d.get("resolved"), bool):  # {"resolved": ..., "tests_status": ...}
                        lab[p.split("/")[-2]] = d["resolved"]
                    else:  # SWE-bench's {instance_id: {"resolved": ...}}
                        for inst, r in d.items():
                            if isinstance(r, dict) and isinstance(r.get("resolved"), bool):
                                lab[inst] = r["resolved"]
            for p in names:
                if p.startswith(run_dir + "/trajs/sb-cli-reports/") and p.endswith(".json"):
                    rep = json.loads(cc.blob_or_none(a.git_dir, a.commit, p) or b"{}")
                    for i in rep.get("unresolved_ids") or []:
                        lab[i] = False
                    for i in rep.get("resolved_ids") or []:
                        lab[i] = True
            run = run_dir.rsplit("/", 1)[-1]
            for path in sorted(p for p in names if p.startswith(run_dir + "/trajs/") and p.endswith(".traj.json")):
                data = out.run_file(path)
                if data is None:
                    continue
                try:
                    traj = json.loads(data)
                    inst = traj.get("instance_id") or path.rsplit("/", 1)[-1][:-len(".traj.json")]
                    msgs = convert(traj.get("messages") or [])
                except cc.BAD_RUN as e:
                    out.skip(f"malformed: {e}")
                    continue
                cfg = ((traj.get("info") or {}).get("config") or {}).get("model") or {}
                out.add(f"{run}/{inst}", cfg.get("model_name"), lab.get(inst), msgs, [BASH_TOOL])
    out.report()


if __name__ == "__main__":
    main()
