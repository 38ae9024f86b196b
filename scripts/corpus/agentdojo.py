#!/usr/bin/env python3
"""Converts AgentDojo recorded runs (runs/<pipeline>/<suite>/<user_task>/<attack>/<injection>.json)
into OpenAI Chat Completions conversations, one per line.

usage: agentdojo.py --git-dir GITDIR --commit SHA --source NAME --out FILE.jsonl [--runs none|attacks|all]
(agentdojo_attacks.py is this script with --runs attacks as default.)

Reads the runs from the repository's git objects at SHA (no work tree).
  --runs none     (default) only the runs without an attack: <attack>/<injection> == none/none;
                  there success (`utility`) means the user's task was done.
  --runs attacks  only the prompt-injection runs (success is still `utility`, the user task).
  --runs all      both.
Each file holds `messages` (roles system/user/assistant/tool; content a string, null, or a list
of {"type": "text", "content": ...} blocks), `utility` (bool) and `pipeline_name`. Tool calls are
{"function", "args", "id"}; ids may be null (then call_<n> is made and results are matched to
calls in order; an id the source reuses within a run gets a _<n> suffix). A tool result that failed carries `error`, which is what the model was shown.
"""
import json
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ beside the scripts
import corpus_common as cc  # noqa: E402
from corpus_common import Malformed  # noqa: E402


def flatten(content):
    """AgentDojo content: str, None, or a list of blocks ({"type": "text", "content": ...})."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, str):
                parts.append(b)
            elif isinstance(b, dict):
                t = b.get("content", b.get("text"))
                if t is None:
                    continue
                if not isinstance(t, str):
                    t = json.dumps(t, ensure_ascii=False)
                parts.append(t)
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def convert_messages(raw):
    out = []
    ids = cc.CallIds()
    for m in raw:
        if not isinstance(m, dict):
            raise Malformed("message not an object")
        role = m.get("role")
        if role in ("system", "user"):
            out.append({"role": role, "content": flatten(m.get("content"))})
        elif role == "assistant":
            msg = {"role": "assistant", "content": flatten(m.get("content"))}
            calls = []
            for tc in m.get("tool_calls") or []:
                cid = ids.new(tc.get("id"))
                args = tc.get("args")
                if args is None:
                    args = {}
                calls.append(cc.tool_call(cid, tc.get("function") or "", json.dumps(args, ensure_ascii=False)))
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
        elif role == "tool":
            match = ids.find(m.get("tool_call_id")) or ids.first()
            if match is None:
                raise Malformed("tool result without a call")
            tid = ids.answer(match)
            err = m.get("error")
            content = err if err else flatten(m.get("content"))
            out.append({"role": "tool", "content": content if content is not None else "",
                        "tool_call_id": tid})
        else:
            raise Malformed(f"unknown role {role!r}")
    return out


def main(default_runs="none"):
    ap = cc.arg_parser()
    ap.add_argument("--runs", choices=["none", "attacks", "all"], default=default_runs)
    a = ap.parse_args()

    names = cc.file_names(a.git_dir, a.commit, "runs")
    paths = []
    for p in names:
        parts = p.split("/")
        if len(parts) != 6 or not p.endswith(".json"):
            continue
        none = parts[4] == "none" and parts[5] == "none.json"
        if (a.runs == "none" and not none) or (a.runs == "attacks" and none):
            continue
        paths.append(p)
    paths.sort()

    with cc.Output(a) as out:
        for p, data in cc.read_blobs(a.git_dir, a.commit, paths):
            why = None
            if data is None:
                why = "blob missing"
            else:
                try:
                    run = json.loads(data)
                    if not run.get("messages"):
                        raise Malformed("no messages recorded")
                    msgs = convert_messages(run["messages"])
                    if not any(m["role"] == "assistant" for m in msgs):
                        raise Malformed("no assistant message" + (" (run errored)" if run.get("error") else ""))
                except (ValueError, Malformed, AttributeError, TypeError) as e:
                    why = f"malformed: {str(e)[:60]}" if isinstance(e, Malformed) else \
                        f"malformed: {type(e).__name__}: {str(e)[:60]}"
            if why:
                out.skip(why)
                continue
            _, pipeline, suite, task, attack, inj = p.split("/")
            inj = inj[:-len(".json")]
            rid = f"{pipeline}/{suite}/{task}" + ("" if attack == "none" else f"/{attack}/{inj}")
            u = run.get("utility")
            out.add(rid, pipeline, u if isinstance(u, bool) else None, msgs)
    out.report(f"wrote {out.written} runs, skipped {sum(out.skipped.values())}", skip_label="skipped ")


if __name__ == "__main__":
    main()
