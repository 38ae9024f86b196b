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
message (corpus_common.tools_from_prompt: description, parameters with type, required, allowed
values).

success: results/results.json of the run: true if in "resolved", false if in
"unresolved_ids" or "empty_error_patch_ids", else null.
"""
import json
import re
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ beside the scripts
import corpus_common as cc  # noqa: E402
from corpus_common import Malformed, text_of  # noqa: E402


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
                args = cc.json_args(fn.get("arguments"))
                if not tc.get("id"):
                    raise Malformed("tool call without id")
                calls.append(cc.tool_call(tc["id"], fn.get("name") or "", args))
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
    return cc.check_assistant(out)


def main():
    a = cc.arg_parser().parse_args()

    names = cc.file_names(a.git_dir, a.commit, "evaluation")
    runs = cc.run_dirs(names, ".json")
    with cc.Output(a) as out:
        for run_dir in runs:
            run = run_dir.rsplit("/", 1)[-1]
            lab = cc.results_labels(cc.blob_or_none(a.git_dir, a.commit, f"{run_dir}/results/results.json"),
                                    ("unresolved_ids", "empty_error_patch_ids", "empty_patch_ids"))
            model = None
            meta = cc.blob_or_none(a.git_dir, a.commit, f"{run_dir}/metadata.yaml")
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
                    out.skip("several completion logs for one instance")
                    continue
                data = out.run_file(paths[0])
                if data is None:
                    continue
                try:
                    log = json.loads(data)
                    msgs = convert(log)
                    tools = cc.tools_from_prompt(text_of((log.get("messages") or [{}])[0].get("content")))
                except cc.BAD_RUN as e:
                    out.skip(f"malformed: {e}")
                    continue
                out.add(f"{run}/{inst}", model, lab.get(inst), msgs, tools)
    out.report()


if __name__ == "__main__":
    main()
