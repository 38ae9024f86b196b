#!/usr/bin/env python3
"""Converts the OpenHands (MopenHands, CodeActAgent) run on SWE-bench Verified kept in
gsmoon97/swe-agent-eval (evaluation/python/verified/20250329_OpenHands_Claude-3.5-Sonnet(Oct)/,
copied from the Multi-SWE-bench experiments: MopenHands + Claude-3.5-Sonnet(Oct), 500 tasks)
into OpenAI Chat Completions conversations, one per line.

usage: mopenhands_claude35_verified.py --git-dir GITDIR --commit SHA --source NAME --out FILE.jsonl

Reads git objects only. Run files: evaluation/<lang>/<split>/<run>/trajs/<instance>/*.json,
one per instance: OpenHands' completion log of the run's last LLM call ({"messages",
"response", "fncall_messages", "fncall_response", ...}). The model was driven with OpenHands'
prompt-based function calling; "fncall_messages" is the same conversation in native
function-calling form (assistant tool_calls, role "tool" results with tool_call_id), and
"fncall_response" is the reply to it.

Messages: fncall_messages followed by fncall_response's message, kept as recorded (tool names
execute_bash / str_replace_editor / finish / ..., argument objects as recorded); content
given as blocks is joined to text. A run that ended with finish keeps that call (it has no
observation). The in-context example OpenHands adds to the first user message in the
prompt-based form is not part of fncall_messages and is not included.
tools: parsed from the "---- BEGIN FUNCTION #n: name ----" blocks of the prompt-based system
message (description, parameters with type, required, allowed values).

success: results/results.json of the run: true if in "resolved", false if in
"unresolved_ids" or "empty_error_patch_ids", else null.
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


def text_of(content):
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    raise Malformed("content neither text nor blocks")


def tools_from_prompt(system):
    """OpenAI tool specs from OpenHands' prompt-based function descriptions."""
    specs = []
    for m in re.finditer(r"---- BEGIN FUNCTION #\d+: (\S+) ----\n(.*?)\n---- END FUNCTION #\d+ ----", system or "", re.S):
        name, body = m.group(1), m.group(2)
        desc = body
        params_txt = ""
        if "\nParameters:\n" in body:
            desc, params_txt = body.split("\nParameters:\n", 1)
        desc = re.sub(r"^Description:\s*", "", desc.strip())
        desc = desc.replace("No parameters are required for this function.", "").strip()
        props, required = {}, []
        cur = None
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


def convert(log):
    msgs = log.get("fncall_messages")
    if not isinstance(msgs, list) or not msgs:
        raise Malformed("no fncall_messages")
    resp = log.get("fncall_response") or {}
    choices = resp.get("choices") if isinstance(resp, dict) else None
    if not choices:
        raise Malformed("no fncall_response")
    msgs = msgs + [choices[0].get("message") or {}]
    out = []
    pending = []
    for m in msgs:
        role = m.get("role")
        content = text_of(m.get("content"))
        if role in ("system", "user"):
            out.append({"role": role, "content": content})
        elif role == "assistant":
            msg = {"role": "assistant", "content": content}
            calls = []
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") or {}
                args = fn.get("arguments")
                if not isinstance(args, str):
                    args = json.dumps(args if args is not None else {}, ensure_ascii=False)
                if not tc.get("id"):
                    raise Malformed("tool call without id")
                calls.append({"id": tc["id"], "type": "function",
                              "function": {"name": fn.get("name") or "", "arguments": args}})
            if calls:
                msg["tool_calls"] = calls
                pending.extend(c["id"] for c in calls)
            out.append(msg)
        elif role == "tool":
            tid = m.get("tool_call_id")
            if tid not in pending:
                raise Malformed("tool result without a call")
            pending.remove(tid)
            out.append({"role": "tool", "content": content if content is not None else "", "tool_call_id": tid})
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

    names = git(a.git_dir, "ls-tree", "-r", "--name-only", a.commit, "--", "evaluation").decode().splitlines()
    runs = sorted({p.split("/trajs/", 1)[0] for p in names if "/trajs/" in p and p.endswith(".json")})
    written = 0
    skipped = {}
    absent = []
    counts = {True: 0, False: 0, None: 0}
    with open(a.out, "w", encoding="utf-8") as f:
        for run_dir in runs:
            run = run_dir.rsplit("/", 1)[-1]
            lab = {}
            rep = blob_or_none(a.git_dir, a.commit, f"{run_dir}/results/results.json")
            if rep:
                r = json.loads(rep)
                for key in ("unresolved_ids", "empty_error_patch_ids", "empty_patch_ids"):
                    for i in r.get(key) or []:
                        lab[i] = False
                res = r.get("resolved")
                for i in (res if isinstance(res, list) else r.get("resolved_ids") or []):
                    lab[i] = True
            model = None
            meta = blob_or_none(a.git_dir, a.commit, f"{run_dir}/metadata.yaml")
            if meta:
                m = re.search(r"^name:\s*(.+)$", meta.decode(), re.M)
                if m and "+" in m.group(1):
                    model = m.group(1).split("+", 1)[1].strip()
            files = sorted(p for p in names if p.startswith(run_dir + "/trajs/") and p.endswith(".json"))
            by_inst = {}
            for p in files:
                by_inst.setdefault(p.split("/")[-2], []).append(p)
            for inst, paths in sorted(by_inst.items()):
                if len(paths) != 1:
                    why = "several completion logs for one instance"
                    skipped[why] = skipped.get(why, 0) + 1
                    continue
                data = blob_or_none(a.git_dir, a.commit, paths[0])
                if data is None:
                    absent.append(paths[0])
                    continue
                try:
                    log = json.loads(data)
                    msgs = convert(log)
                    tools = tools_from_prompt(text_of((log.get("messages") or [{}])[0].get("content")))
                except (Malformed, ValueError, AttributeError, TypeError) as e:
                    why = f"malformed: {e}"
                    skipped[why] = skipped.get(why, 0) + 1
                    continue
                success = lab.get(inst)
                counts[success] += 1
                rec = {"id": f"{run}/{inst}", "source": a.source, "model": model, "success": success,
                       "messages": msgs}
                if tools:
                    rec["tools"] = tools
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
