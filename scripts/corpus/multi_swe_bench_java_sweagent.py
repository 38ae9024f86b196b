#!/usr/bin/env python3
"""Converts the SWE-agent runs on SWE-bench-java (Verified, 91 tasks) published in
multi-swe-bench/experiments (the 2024 SWE-bench-java leaderboard) into OpenAI Chat Completions
conversations, one per line.

usage: multi_swe_bench_java_sweagent.py --git-dir GITDIR --commit SHA --source NAME --out FILE.jsonl

Reads git objects only. A run directory is evaluation/<lang>/<split>/<run>/ holding trajs/*.traj
(SWE-agent 0.x trajectories), metadata.yaml ("name: SWE-agent + <model>"), results/results.json
and logs/<instance>/run_instance.log (the SWE-bench-java harness log of that instance).

success: true if the instance is in results.json "resolved", false if it is in "unresolved_ids"
or "empty_patch_ids"; for an instance in none of these lists (results.json of the gpt-4o-mini
run covers only one instance) the harness log's last "Result for <id>: resolved: True|False"
line decides; otherwise null (not evaluated, or an evaluation error).

Messages: the trajectory's "history" (what the model saw). system -> system; the demonstration
and the issue -> user; each assistant turn -> assistant with its "thought" as content and its
"action" as one tool call; the next user turn (the observation) -> tool message answering it.
SWE-agent acts by text: the tool name is the action's first word when that word is one of the
interface commands listed in the system prompt (open, goto, scroll_down, scroll_up, create,
edit, search_dir, search_file, find_file, submit, ...), else "bash"; arguments are
{"command": "<the action exactly as issued, trailing newlines removed>"}. The last action's
observation, when it is only in trajectory[-1] (the submit diff), is added as its tool
message. Turns the harness wrote itself on stopping a run ("Exit due to cost limit", action
exit_cost / exit_context / ...) are not model calls and are left out (counted on stderr).
tools: one spec per interface command (docstring and signature from the system prompt, one
string parameter "command") plus "bash".
"""
import argparse
import json
import re
import subprocess
import sys


def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True,
                          stdout=subprocess.PIPE).stdout


def blob_or_none(git_dir, commit, path):
    r = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "blob", f"{commit}:{path}"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return r.stdout if r.returncode == 0 else None


class Malformed(Exception):
    pass


def interface_commands(system_prompt):
    """[(name, docstring, signature)] from the COMMANDS: section of a SWE-agent system prompt."""
    i = system_prompt.find("COMMANDS:")
    if i < 0:
        return []
    text = system_prompt[i + len("COMMANDS:"):]
    out = []
    for m in re.finditer(r"^([A-Za-z_][\w-]*):[ \t]*\n((?:[ \t]+.*\n?)*)", text, re.M):
        body = m.group(2)
        doc = re.search(r"^\s*docstring:\s*(.*)$", body, re.M)
        sig = re.search(r"^\s*signature:\s*(.*)$", body, re.M)
        if not (doc or sig):
            continue
        out.append((m.group(1), doc.group(1).strip() if doc else "", sig.group(1).strip() if sig else m.group(1)))
    return out


def tool_specs(commands):
    specs = []
    for name, doc, sig in commands:
        specs.append({"type": "function", "function": {
            "name": name,
            "description": (doc + " " if doc else "") + f"Usage: {sig}",
            "parameters": {"type": "object", "properties": {"command": {
                "type": "string", "description": f"The full command line as typed, e.g. `{sig}`"}},
                "required": ["command"]}}})
    specs.append({"type": "function", "function": {
        "name": "bash",
        "description": "Run a shell command in the repository (any command that is not one of the interface commands).",
        "parameters": {"type": "object", "properties": {"command": {
            "type": "string", "description": "The full shell command"}}, "required": ["command"]}}})
    return specs


def harness_exit(h):
    action = (h.get("action") or "").strip()
    thought = (h.get("thought") or h.get("content") or "").strip()
    return action.startswith("exit_") and thought.startswith("Exit due to")


def convert(traj, stats):
    history = traj.get("history")
    if not isinstance(history, list) or not history:
        raise Malformed("no history")
    system = next((h.get("content") or "" for h in history if h.get("role") == "system"), "")
    commands = interface_commands(system)
    names = {c[0] for c in commands}
    out = []
    pending = None
    n = 0
    for h in history:
        role = h.get("role")
        content = h.get("content")
        if role == "system":
            out.append({"role": "system", "content": content})
        elif role == "user":
            if pending is not None:
                out.append({"role": "tool", "content": content if content is not None else "",
                            "tool_call_id": pending})
                pending = None
            else:
                out.append({"role": "user", "content": content})
        elif role == "assistant":
            if harness_exit(h):
                stats["harness exit turns left out"] = stats.get("harness exit turns left out", 0) + 1
                continue
            if pending is not None:
                raise Malformed("assistant turn after an unanswered action")
            action = h.get("action")
            action = action.rstrip("\n") if isinstance(action, str) else ""
            if action.strip():
                n += 1
                cid = f"call_{n}"
                word = action.strip().split(None, 1)[0]
                name = word if word in names else "bash"
                thought = h.get("thought")
                out.append({"role": "assistant", "content": thought if thought is not None else content,
                            "tool_calls": [{"id": cid, "type": "function", "function": {
                                "name": name, "arguments": json.dumps({"command": action}, ensure_ascii=False)}}]})
                pending = cid
            else:
                out.append({"role": "assistant", "content": content})
        else:
            raise Malformed(f"unknown role {role!r}")
    if pending is not None:
        steps = traj.get("trajectory") or []
        last_action = out[-1]["tool_calls"][0]["function"]["arguments"] if out and out[-1].get("tool_calls") else None
        if steps and isinstance(steps[-1], dict) and steps[-1].get("observation") is not None \
                and last_action is not None \
                and json.loads(last_action)["command"].strip() == (steps[-1].get("action") or "").strip():
            out.append({"role": "tool", "content": steps[-1]["observation"], "tool_call_id": pending})
    if not any(m["role"] == "assistant" for m in out):
        raise Malformed("no assistant message")
    return out, tool_specs(commands)


def labels(git_dir, commit, run_dir, names):
    """instance id -> True/False from results/results.json, then the per-instance harness logs."""
    lab = {}
    data = blob_or_none(git_dir, commit, f"{run_dir}/results/results.json")
    if data:
        r = json.loads(data)
        for key in ("unresolved_ids", "empty_patch_ids"):
            for i in r.get(key) or []:
                lab[i] = False
        res = r.get("resolved")
        for i in (res if isinstance(res, list) else r.get("resolved_ids") or []):
            lab[i] = True
    for p in names:
        if p.startswith(run_dir + "/logs/") and p.endswith("/run_instance.log"):
            inst = p.split("/")[-2]
            if inst in lab:
                continue
            log = blob_or_none(git_dir, commit, p)
            if log is None:
                continue
            m = re.findall(r"Result for (\S+): resolved: (True|False)", log.decode("utf-8", "replace"))
            if m and m[-1][0] == inst:
                lab[inst] = m[-1][1] == "True"
    return lab


def model_of(git_dir, commit, run_dir):
    meta = blob_or_none(git_dir, commit, f"{run_dir}/metadata.yaml")
    if meta:
        m = re.search(r"^name:\s*(.+)$", meta.decode(), re.M)
        if m and "+" in m.group(1):
            return m.group(1).split("+", 1)[1].strip().strip("'\"")
    m = re.match(r"\d{8}_SWE-agent_(.+)$", run_dir.rsplit("/", 1)[-1])
    return m.group(1) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    names = git(a.git_dir, "ls-tree", "-r", "--name-only", a.commit, "--", "evaluation").decode().splitlines()
    runs = sorted({p.rsplit("/trajs/", 1)[0] for p in names if "/trajs/" in p and p.endswith(".traj")})
    written = 0
    skipped = {}
    absent = []
    stats = {}
    counts = {True: 0, False: 0, None: 0}
    with open(a.out, "w", encoding="utf-8") as f:
        for run_dir in runs:
            lab = labels(a.git_dir, a.commit, run_dir, names)
            model = model_of(a.git_dir, a.commit, run_dir)
            run = run_dir.rsplit("/", 1)[-1]
            for path in sorted(p for p in names if p.startswith(run_dir + "/trajs/") and p.endswith(".traj")):
                data = blob_or_none(a.git_dir, a.commit, path)
                if data is None:
                    absent.append(path)
                    continue
                inst = path.rsplit("/", 1)[-1][:-len(".traj")]
                try:
                    msgs, tools = convert(json.loads(data), stats)
                except (Malformed, ValueError, AttributeError, TypeError) as e:
                    why = f"malformed: {e}"
                    skipped[why] = skipped.get(why, 0) + 1
                    continue
                success = lab.get(inst)
                counts[success] += 1
                rec = {"id": f"{run}/{inst}", "source": a.source, "model": model, "success": success,
                       "messages": msgs, "tools": tools}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                written += 1
    print(f"{a.source}: wrote {written} runs (solved {counts[True]}, unsolved {counts[False]}, unknown {counts[None]}), "
          f"skipped {sum(skipped.values())}; {len(absent)} run files absent from this copy", file=sys.stderr)
    for why, k in sorted(list(skipped.items()) + [(f"note: {k}", v) for k, v in stats.items()]):
        print(f"  {k}: {why}", file=sys.stderr)
    for p in absent:
        print(f"  absent blob: {p}", file=sys.stderr)


if __name__ == "__main__":
    main()
