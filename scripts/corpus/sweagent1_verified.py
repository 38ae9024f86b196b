#!/usr/bin/env python3
"""Converts SWE-agent 1.x runs on SWE-bench Verified copied from SWE-bench/experiments into
lgetter/swe-agent-trajectory-analysis (its first commit 9ecabb67 holds
20250511_sweagent_lm_32b = SWE-agent 1.0.1 + SWE-agent-LM-32B, XML function calling in text, and
20250522_sweagent_claude-4-sonnet-20250514 = SWE-agent 1.1.0 + Claude 4 Sonnet, native function
calling; later commits deleted them) into OpenAI Chat Completions conversations, one per line.

usage: sweagent1_verified.py --git-dir GITDIR --commit SHA --source NAME --out FILE.jsonl

Reads git objects only. A run directory <run>/ holds trajs/<instance>/<instance>.traj,
metadata.yaml and results/results.json (SWE-bench/experiments: "resolved", "no_generation",
"no_logs").

success: true if the instance is in results.json "resolved"; null if it is in "no_generation"
or "no_logs" (nothing was evaluated); otherwise false (evaluated, not resolved).

Messages: the trajectory's "history" (what the model saw), in order; content given as blocks
is joined to text. system -> system; the task -> user. An assistant turn with native
"tool_calls" keeps them as recorded (ids, names, JSON arguments) with its text as content, and
the role "tool" message answering it (tool_call_ids[0]) stays a tool message. An assistant
turn that acted in text with SWE-agent's XML function-calling format
(<function=NAME><parameter=P>V</parameter></function>) becomes one tool call NAME with the
parameters as arguments, parsed as SWE-agent's XMLFunctionCallingParser does (execute_bash ->
bash, finish -> submit, one leading/trailing newline cut from values, view_range as a JSON
list), its "thought" as content, and the next user turn (the observation) the tool message
answering it. Should neither be present but an "action" be recorded, the action becomes one
call named by its first word with {"command": action}. Turns the harness wrote itself when it
stopped a run ("Exit due to cost limit" / "Exit due to context window", no action) and the
observation after them are not model calls and are left out (counted on stderr).
tools: parsed from the "---- BEGIN FUNCTION #n: name ----" blocks of the system prompt when it
has them (the XML runs); native function-calling runs do not record their tool specs.
"""
import argparse
import json
import re
import subprocess
import sys

FN_RE = re.compile(r"<function=([^>]+)>\n(.*?)</function>", re.DOTALL)
PARAM_RE = re.compile(r"<parameter=([^>]+)>(.*?)</parameter>", re.DOTALL)


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


def tools_from_prompt(system):
    """OpenAI tool specs from '---- BEGIN FUNCTION #n: name ----' blocks."""
    specs = []
    for m in re.finditer(r"---- BEGIN FUNCTION #\d+: (\S+) ----\n(.*?)\n---- END FUNCTION #\d+ ----", system or "", re.S):
        name, body = m.group(1), m.group(2)
        desc, params_txt = (body.split("\nParameters:\n", 1) + [""])[:2] if "\nParameters:\n" in body else (body, "")
        desc = re.sub(r"^Description:\s*", "", desc.strip())
        desc = desc.replace("No parameters are required for this function.", "").strip()
        props, required, cur = {}, [], None
        for line in params_txt.splitlines():
            p = re.match(r"\s*\(\d+\)\s+(\w+)\s+\((\w+),\s*(required|optional)\):\s*(.*)$", line)
            if p:
                cur = p.group(1)
                props[cur] = {"type": p.group(2), "description": p.group(4)}
                if p.group(3) == "required":
                    required.append(cur)
                continue
            e = re.match(r"\s*Allowed values:\s*\[(.*)\]\s*$", line)
            if e and cur:
                props[cur]["enum"] = re.findall(r"`([^`]*)`", e.group(1))
            elif cur and line.strip():
                props[cur]["description"] += "\n" + line.strip()
        params = {"type": "object", "properties": props}
        if required:
            params["required"] = required
        specs.append({"type": "function", "function": {"name": name, "description": desc, "parameters": params}})
    return specs


def xml_call(message):
    """(name, arguments dict) of SWE-agent's XML function call in message, or None."""
    m = FN_RE.search(message or "")
    if not m:
        return None
    name = m.group(1).strip()
    name = {"execute_bash": "bash", "finish": "submit"}.get(name, name)
    args = {}
    for k, v in PARAM_RE.findall(m.group(2)):
        v = re.sub(r"^\n|\n$", "", v)
        if k == "view_range" and re.fullmatch(r"\[\d+,\s*\d+\]", v):
            v = json.loads(v)
        args[k] = v
    return name, args


def harness_exit(h):
    text = (h.get("thought") or text_of(h.get("content")) or "").strip()
    action = (h.get("action") or "").strip()
    return text.startswith("Exit due to") and (not action or action.startswith("exit"))


def convert(traj, stats):
    history = traj.get("history")
    if not isinstance(history, list) or not history:
        raise Malformed("no history")
    out = []
    pending = None
    skip_obs = False
    n = 0
    for h in history:
        role = h.get("role")
        content = text_of(h.get("content"))
        if role == "system":
            out.append({"role": "system", "content": content})
        elif role == "assistant":
            if harness_exit(h):
                stats["harness exit turns left out"] = stats.get("harness exit turns left out", 0) + 1
                skip_obs = True
                continue
            if pending is not None:
                raise Malformed("assistant turn after an unanswered call")
            tcs = h.get("tool_calls")
            if tcs:
                if len(tcs) != 1:
                    raise Malformed("several tool calls in one turn")
                tc = tcs[0]
                fn = tc.get("function") or {}
                args = fn.get("arguments")
                if not isinstance(args, str):
                    args = json.dumps(args if args is not None else {}, ensure_ascii=False)
                cid = tc.get("id") or f"call_{n + 1}"
                n += 1
                out.append({"role": "assistant", "content": content, "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": fn.get("name") or "", "arguments": args}}]})
                pending = cid
                continue
            call = xml_call(content)
            action = (h.get("action") or "").strip()
            if call is None and action:
                call = (action.split(None, 1)[0], {"command": action})
                stats["turns whose action was taken as a command line"] = \
                    stats.get("turns whose action was taken as a command line", 0) + 1
            if call is not None:
                n += 1
                cid = f"call_{n}"
                thought = h.get("thought")
                if thought is None:
                    m = FN_RE.search(content or "")
                    thought = ((content or "")[:m.start()] + (content or "")[m.end():]).strip() if m else content
                out.append({"role": "assistant", "content": thought, "tool_calls": [
                    {"id": cid, "type": "function",
                     "function": {"name": call[0], "arguments": json.dumps(call[1], ensure_ascii=False)}}]})
                pending = cid
            else:
                out.append({"role": "assistant", "content": content})
        elif role in ("user", "tool"):
            if skip_obs:
                skip_obs = False
                continue
            if role == "tool":
                ids = h.get("tool_call_ids") or []
                if pending is None or (ids and ids[0] != pending):
                    raise Malformed("tool result without its call")
            if pending is not None:
                out.append({"role": "tool", "content": content if content is not None else "", "tool_call_id": pending})
                pending = None
            else:
                out.append({"role": "user", "content": content})
        else:
            raise Malformed(f"unknown role {role!r}")
    if not any(x["role"] == "assistant" for x in out):
        raise Malformed("no assistant message")
    system = next((x["content"] for x in out if x["role"] == "system"), "")
    return out, tools_from_prompt(system)


def model_of(meta):
    """The model from a SWE-bench/experiments metadata.yaml (tags.model, else info.name after '+')."""
    text = meta.decode("utf-8", "replace") if meta else ""
    m = re.search(r"^\s+model:\s*\n((?:\s+- .*\n)+)", text, re.M)
    if m:
        models = re.findall(r"- (.+)", m.group(1))
        if len(models) == 1 and " " not in models[0].strip():
            return models[0].strip().strip("'\"")
    m = re.search(r"^\s+name:\s*(.+)$", text, re.M)
    if m and "+" in m.group(1):
        return m.group(1).split("+", 1)[1].strip().strip("'\"")
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    names = git(a.git_dir, "ls-tree", "-r", "--name-only", a.commit).decode().splitlines()
    runs = sorted({p.split("/trajs/", 1)[0] for p in names if "/trajs/" in p and p.endswith(".traj")})
    written = 0
    skipped = {}
    absent = []
    stats = {}
    counts = {True: 0, False: 0, None: 0}
    with open(a.out, "w", encoding="utf-8") as f:
        for run_dir in runs:
            run = run_dir.rsplit("/", 1)[-1]
            rep = blob_or_none(a.git_dir, a.commit, f"{run_dir}/results/results.json")
            res = json.loads(rep) if rep else None
            model = model_of(blob_or_none(a.git_dir, a.commit, f"{run_dir}/metadata.yaml"))
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
                if res is None:
                    success = None
                elif inst in (res.get("resolved") or []):
                    success = True
                elif inst in (res.get("no_generation") or []) or inst in (res.get("no_logs") or []):
                    success = None
                else:
                    success = False
                counts[success] += 1
                rec = {"id": f"{run}/{inst}", "source": a.source, "model": model, "success": success,
                       "messages": msgs}
                if tools:
                    rec["tools"] = tools
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                written += 1
    print(f"{a.source}: wrote {written} runs (solved {counts[True]}, unsolved {counts[False]}, unknown {counts[None]}), "
          f"skipped {sum(skipped.values())}; {len(absent)} run files absent from this copy", file=sys.stderr)
    for why, k in sorted(list(skipped.items()) + [(f"note: {k}", v) for k, v in stats.items()]):
        print(f"  {k}: {why}", file=sys.stderr)
    by_run = {}
    for p in absent:
        by_run[p.split("/trajs/", 1)[0]] = by_run.get(p.split("/trajs/", 1)[0], 0) + 1
    for r, k in sorted(by_run.items()):
        print(f"  absent blobs (the copy lacks big files): {k} under {r}", file=sys.stderr)


if __name__ == "__main__":
    main()
