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
has them (the XML runs; corpus_common.tools_from_prompt); native function-calling runs do not
record their tool specs.
"""
import json
import re
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ beside the scripts
import corpus_common as cc  # noqa: E402
from corpus_common import Malformed, text_of  # noqa: E402

FN_RE = re.compile(r"<function=([^>]+)>\n(.*?)</function>", re.DOTALL)
PARAM_RE = re.compile(r"<parameter=([^>]+)>(.*?)</parameter>", re.DOTALL)


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
                cc.tally(stats, "harness exit turns left out")
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
                cid = tc.get("id") or f"call_{n + 1}"
                n += 1
                out.append({"role": "assistant", "content": content, "tool_calls": [
                    cc.tool_call(cid, fn.get("name") or "", cc.json_args(fn.get("arguments")))]})
                pending = cid
                continue
            call = xml_call(content)
            action = (h.get("action") or "").strip()
            if call is None and action:
                call = (action.split(None, 1)[0], {"command": action})
                cc.tally(stats, "turns whose action was taken as a command line")
            if call is not None:
                n += 1
                cid = f"call_{n}"
                thought = h.get("thought")
                if thought is None:
                    m = FN_RE.search(content or "")
                    thought = ((content or "")[:m.start()] + (content or "")[m.end():]).strip() if m else content
                out.append({"role": "assistant", "content": thought, "tool_calls": [
                    cc.tool_call(cid, call[0], json.dumps(call[1], ensure_ascii=False))]})
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
    cc.check_assistant(out)
    system = next((x["content"] for x in out if x["role"] == "system"), "")
    return out, cc.tools_from_prompt(system)


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
    a = cc.arg_parser().parse_args()

    names = cc.file_names(a.git_dir, a.commit)
    runs = cc.run_dirs(names, ".traj")
    with cc.Output(a) as out:
        for run_dir in runs:
            run = run_dir.rsplit("/", 1)[-1]
            rep = cc.blob_or_none(a.git_dir, a.commit, f"{run_dir}/results/results.json")
            res = json.loads(rep) if rep else None
            model = model_of(cc.blob_or_none(a.git_dir, a.commit, f"{run_dir}/metadata.yaml"))

            def success_of(inst, res=res):
                if res is None:
                    return None
                if inst in (res.get("resolved") or []):
                    return True
                if inst in (res.get("no_generation") or []) or inst in (res.get("no_logs") or []):
                    return None
                return False

            paths = sorted(p for p in names if p.startswith(run_dir + "/trajs/") and p.endswith(".traj"))
            cc.add_traj_files(out, paths, ".traj", convert, run, model, success_of)
    out.report(list_absent=False)
    by_run = {}
    for p in out.absent:
        cc.tally(by_run, p.split("/trajs/", 1)[0])
    for r, k in sorted(by_run.items()):
        print(f"  absent blobs (the copy lacks big files): {k} under {r}", file=sys.stderr)


if __name__ == "__main__":
    main()
