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
import argparse
import json
import re
import subprocess
import sys

# The action regex of mini-SWE-agent 1.x (DefaultAgent.parse_action).
ACTION_RE = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)

BASH_TOOL = {"type": "function", "function": {
    "name": "bash",
    "description": "Run one bash command (or several joined with && or ||) in a fresh subshell in the repository.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The command"}},
                   "required": ["command"]}}}


def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True,
                          stdout=subprocess.PIPE).stdout


def blob_or_none(git_dir, commit, path):
    r = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "blob", f"{commit}:{path}"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return r.stdout if r.returncode == 0 else None


class Malformed(Exception):
    pass


def text_of(content):
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    raise Malformed("content neither text nor blocks")


def convert(messages):
    out = []
    pending = None
    n = 0
    for m in messages:
        role = m.get("role")
        content = text_of(m.get("content"))
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
                            "tool_calls": [{"id": cid, "type": "function", "function": {
                                "name": "bash", "arguments": json.dumps({"command": b.group(1).strip()}, ensure_ascii=False)}}]})
                pending = cid
            else:
                out.append({"role": "assistant", "content": content})
        else:
            raise Malformed(f"unknown role {role!r}")
    if not any(x["role"] == "assistant" for x in out):
        raise Malformed("no assistant message")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    names = git(a.git_dir, "ls-tree", "-r", "--name-only", a.commit, "--", "swebench_results").decode().splitlines()
    runs = sorted({p.split("/trajs/", 1)[0] for p in names if "/trajs/" in p and p.endswith(".traj.json")})
    written = 0
    skipped = {}
    absent = []
    counts = {True: 0, False: 0, None: 0}
    with open(a.out, "w", encoding="utf-8") as f:
        for run_dir in runs:
            lab = {}
            for p in names:
                if p.startswith(run_dir + "/logs/") and p.endswith("/report.json"):
                    data = blob_or_none(a.git_dir, a.commit, p)
                    d = json.loads(data) if data else {}
                    if isinstance(d.get("resolved"), bool):  # {"resolved": ..., "tests_status": ...}
                        lab[p.split("/")[-2]] = d["resolved"]
                    else:  # SWE-bench's {instance_id: {"resolved": ...}}
                        for inst, r in d.items():
                            if isinstance(r, dict) and isinstance(r.get("resolved"), bool):
                                lab[inst] = r["resolved"]
            for p in names:
                if p.startswith(run_dir + "/trajs/sb-cli-reports/") and p.endswith(".json"):
                    rep = json.loads(blob_or_none(a.git_dir, a.commit, p) or b"{}")
                    for i in rep.get("unresolved_ids") or []:
                        lab[i] = False
                    for i in rep.get("resolved_ids") or []:
                        lab[i] = True
            run = run_dir.rsplit("/", 1)[-1]
            for path in sorted(p for p in names if p.startswith(run_dir + "/trajs/") and p.endswith(".traj.json")):
                data = blob_or_none(a.git_dir, a.commit, path)
                if data is None:
                    absent.append(path)
                    continue
                try:
                    traj = json.loads(data)
                    inst = traj.get("instance_id") or path.rsplit("/", 1)[-1][:-len(".traj.json")]
                    msgs = convert(traj.get("messages") or [])
                except (Malformed, ValueError, AttributeError, TypeError) as e:
                    why = f"malformed: {e}"
                    skipped[why] = skipped.get(why, 0) + 1
                    continue
                cfg = ((traj.get("info") or {}).get("config") or {}).get("model") or {}
                model = cfg.get("model_name")
                success = lab.get(inst)
                counts[success] += 1
                rec = {"id": f"{run}/{inst}", "source": a.source, "model": model, "success": success,
                       "messages": msgs, "tools": [BASH_TOOL]}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                written += 1
    print(f"{a.source}: wrote {written} runs (solved {counts[True]}, unsolved {counts[False]}, unknown {counts[None]}), "
          f"skipped {sum(skipped.values())}; {len(absent)} run files absent from this copy", file=sys.stderr)
    for why, k in sorted(skipped.items()):
        print(f"  {k}: {why}", file=sys.stderr)
    for p in absent:
        print(f"  absent blob: {p}", file=sys.stderr)


if __name__ == "__main__":
    main()
