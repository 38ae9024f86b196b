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
import argparse
import json
import subprocess
import sys


def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True,
                          stdout=subprocess.PIPE).stdout


def read_blobs(git_dir, commit, paths):
    """Yields (path, bytes or None) for paths at commit, using one cat-file --batch process."""
    proc = subprocess.Popen(["git", "--git-dir", git_dir, "cat-file", "--batch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        for p in paths:
            proc.stdin.write(f"{commit}:{p}\n".encode())
            proc.stdin.flush()
            header = proc.stdout.readline().decode().rstrip("\n")
            if header.endswith(" missing") or not header:
                yield p, None
                continue
            size = int(header.split()[2])
            data = proc.stdout.read(size)
            proc.stdout.read(1)
            yield p, data
    finally:
        proc.stdin.close()
        proc.wait()


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


class Malformed(Exception):
    pass


def convert_messages(raw):
    out = []
    n = 0
    pending = []  # (id in the source, id written) of calls not yet answered, in order
    used = set()
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
                n += 1
                src_id = tc.get("id")
                cid = src_id or f"call_{n}"
                if cid in used:  # a source id reused within the run: keep ids unique
                    cid = f"{cid}_{n}"
                used.add(cid)
                pending.append((src_id, cid))
                args = tc.get("args")
                if args is None:
                    args = {}
                calls.append({"id": cid, "type": "function",
                              "function": {"name": tc.get("function") or "",
                                           "arguments": json.dumps(args, ensure_ascii=False)}})
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
        elif role == "tool":
            src = m.get("tool_call_id")
            match = next((p for p in pending if src and p[0] == src), None) or (pending[0] if pending else None)
            if match is None:
                raise Malformed("tool result without a call")
            pending.remove(match)
            tid = match[1]
            err = m.get("error")
            content = err if err else flatten(m.get("content"))
            out.append({"role": "tool", "content": content if content is not None else "",
                        "tool_call_id": tid})
        else:
            raise Malformed(f"unknown role {role!r}")
    return out


def main(default_runs="none"):
    ap = argparse.ArgumentParser()
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", choices=["none", "attacks", "all"], default=default_runs)
    a = ap.parse_args()

    names = git(a.git_dir, "ls-tree", "-r", "--name-only", a.commit, "--", "runs").decode().splitlines()
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

    written = 0
    skipped = {}
    with open(a.out, "w", encoding="utf-8") as f:
        for p, data in read_blobs(a.git_dir, a.commit, paths):
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
                skipped[why] = skipped.get(why, 0) + 1
                continue
            _, pipeline, suite, task, attack, inj = p.split("/")
            inj = inj[:-len(".json")]
            rid = f"{pipeline}/{suite}/{task}" + ("" if attack == "none" else f"/{attack}/{inj}")
            u = run.get("utility")
            rec = {"id": rid, "source": a.source, "model": pipeline,
                   "success": u if isinstance(u, bool) else None, "messages": msgs}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            written += 1
    print(f"{a.source}: wrote {written} runs, skipped {sum(skipped.values())}", file=sys.stderr)
    for why, k in sorted(skipped.items()):
        print(f"  skipped {k}: {why}", file=sys.stderr)


if __name__ == "__main__":
    main()
