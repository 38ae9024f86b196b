#!/usr/bin/env python3
"""Converts the SWE-agent runs on SWE-bench Lite that the AutoCodeRover authors published next to
their own results (nus-apr/auto-code-rover, results/swe-agent-results/cost_2_{1,2,3}: three runs
of SWE-agent 0.x with gpt4-0125 = gpt-4-0125-preview, $2 cost limit per instance, 275-276
trajectories of the 300 Lite tasks each) into OpenAI Chat Completions conversations, one per line.

usage: acr_sweagent_lite.py --git-dir GITDIR --commit SHA --source NAME --out FILE.jsonl

Reads git objects only. A run directory holds <instance>.traj (SWE-agent 0.x trajectories),
all_preds.jsonl (the patch of every instance the run finished) and final_report.json (the
evaluation the AutoCodeRover authors ran on those patches: "stats" and
"resolved_per_project").

success: true if the instance is in final_report.json resolved_per_project; false if it has a
non-empty model_patch in all_preds.jsonl but is not resolved (final_report "generated" =
"with_logs" = the count of such patches, so all of them were evaluated); otherwise null (no
patch, so nothing was evaluated).

Messages: the trajectory's "history" (what the model saw). system -> system; the issue (and a
demonstration, if any) -> user; each assistant turn -> assistant with its "thought" as content
and its "action" as one tool call; the next user turn (the observation) -> tool message
answering it. SWE-agent acts by text: the tool name is the action's first word when that word
is one of the interface commands listed in the system prompt (open, goto, scroll_down,
scroll_up, create, edit, search_dir, search_file, find_file, submit), else "bash"; arguments
are {"command": "<the action exactly as issued, trailing newlines removed>"}. The last
action's observation, when it is only in trajectory[-1] (the submit diff), is added as its
tool message. Turns the harness wrote itself on stopping a run ("Exit due to cost limit",
action exit_cost / exit_context / ...) are not model calls and are left out (counted on
stderr). tools: one spec per interface command (docstring and signature from the system
prompt, one string parameter "command") plus "bash".
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


def labels(git_dir, commit, run_dir):
    """instance id -> True/False from final_report.json and all_preds.jsonl (see above)."""
    lab = {}
    preds = blob_or_none(git_dir, commit, f"{run_dir}/all_preds.jsonl")
    for line in (preds or b"").decode().splitlines():
        if line.strip():
            p = json.loads(line)
            if (p.get("model_patch") or "").strip():
                lab[p["instance_id"]] = False
    rep = blob_or_none(git_dir, commit, f"{run_dir}/final_report.json")
    if rep is None:
        return {}
    for ids in (json.loads(rep).get("resolved_per_project") or {}).values():
        for i in ids:
            lab[i] = True
    return lab


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    base = "results/swe-agent-results"
    names = git(a.git_dir, "ls-tree", "-r", "--name-only", a.commit, "--", base).decode().splitlines()
    runs = sorted({p.rsplit("/", 1)[0] for p in names if p.endswith(".traj")})
    written = 0
    skipped = {}
    absent = []
    stats = {}
    counts = {True: 0, False: 0, None: 0}
    # SWE-agent's model shortcut gpt4-0125 (the run name's first part) is gpt-4-0125-preview.
    models = {"gpt4-0125": "gpt-4-0125-preview"}
    with open(a.out, "w", encoding="utf-8") as f:
        for run_dir in runs:
            lab = labels(a.git_dir, a.commit, run_dir)
            run = run_dir.rsplit("/", 1)[-1]
            model = None
            preds = blob_or_none(a.git_dir, a.commit, f"{run_dir}/all_preds.jsonl")
            for line in (preds or b"").decode().splitlines():
                if line.strip():
                    short = (json.loads(line).get("model_name_or_path") or "").split("__", 1)[0]
                    model = models.get(short, short or None)
                    break
            for path in sorted(p for p in names if p.startswith(run_dir + "/") and p.endswith(".traj")):
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
                rec = {"id": f"swe-agent-{run}/{inst}", "source": a.source, "model": model, "success": success,
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
