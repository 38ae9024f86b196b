#!/usr/bin/env python3
"""Converts tau-bench (sierra-research/tau-bench) recorded runs into OpenAI Chat Completions
conversations, one per line.

usage: tau_bench.py --git-dir GITDIR --commit SHA --source NAME --out FILE.jsonl

Reads git objects only. Run files: every *.json under historical_trajectories/ (the published
runs: <model>-<domain>.json) and under any results/ directory (what tau_bench/run.py writes:
<strategy>-<model>-<temperature>_range_<a>-<b>_user-<user model>-<user strategy>_<time>.json).
Each is a list of {"task_id", "trial", "reward", "info", "traj"}, where traj is already a list of
OpenAI messages (system = domain policy, user = the user simulator, assistant with tool_calls,
tool with tool_call_id). Call ids the source reuses within a run (it does: the same OpenAI id
comes back for later calls) get a _<n> suffix so that ids are unique; each result is tied to the
earliest unanswered call with its source id. success is reward == 1. A file whose blob is absent from the copy (the
snapshot may lack big files) is counted and reported.
tools: the domain's tool specs (get_info() of tau_bench/envs/<domain>/tools/*.py, in ALL_TOOLS
order) read from the same commit; the domain is taken from the file name or the system prompt.
"""
import argparse
import ast
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


def domain_tools(git_dir, commit, domain, names):
    """OpenAI tool specs from the literal dict returned by each tool's get_info()."""
    base = f"tau_bench/envs/{domain}/tools"
    by_class = {}
    for path in names:
        if not (path.startswith(base + "/") and path.endswith(".py")) or path.count("/") != 4:
            continue
        src = blob_or_none(git_dir, commit, path)
        if src is None:
            continue
        try:
            tree = ast.parse(src.decode())
        except SyntaxError:
            continue
        for cls in tree.body:
            if not isinstance(cls, ast.ClassDef):
                continue
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "get_info":
                    for st in fn.body:
                        if isinstance(st, ast.Return):
                            try:
                                by_class[cls.name] = ast.literal_eval(st.value)
                            except (ValueError, SyntaxError):
                                pass
    # Order as in ALL_TOOLS of the package's __init__.py.
    order = []
    init = blob_or_none(git_dir, commit, base + "/__init__.py")
    if init:
        m = re.search(r"ALL_TOOLS\s*=\s*\[(.*?)\]", init.decode(), re.S)
        if m:
            order = re.findall(r"\w+", m.group(1))
    tools = [by_class[c] for c in order if c in by_class]
    tools += [v for c, v in sorted(by_class.items()) if c not in order]
    return tools


def model_and_domain(path, traj):
    name = path.rsplit("/", 1)[-1][:-len(".json")]
    domain = None
    m = re.match(r"(.+)-(airline|retail)$", name)
    model = None
    if m:
        model, domain = m.group(1), m.group(2)
    else:
        m = re.match(r"([a-z-]+?)-(.+)-([0-9.]+)_range_", name)
        if m:
            model = m.group(2)
    if domain is None and traj:
        first = (traj[0].get("content") or "")[:200].lower() if isinstance(traj[0], dict) else ""
        for d in ("airline", "retail"):
            if f"# {d} agent policy" in first:
                domain = d
    return model, domain


class Malformed(Exception):
    pass


def text(c):
    """Message content as a string (or None); a list of content blocks is flattened."""
    if c is None or isinstance(c, str):
        return c
    if isinstance(c, list):
        return "\n".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in c)
    return json.dumps(c, ensure_ascii=False)


def convert_traj(traj):
    out = []
    n = 0
    pending = []  # (id in the source, id written) of calls not yet answered, in order
    used = set()
    for m in traj:
        if not isinstance(m, dict):
            raise Malformed("message not an object")
        role = m.get("role")
        if role in ("system", "user"):
            out.append({"role": role, "content": text(m.get("content"))})
        elif role == "assistant":
            msg = {"role": "assistant", "content": text(m.get("content"))}
            calls = []
            for tc in m.get("tool_calls") or []:
                n += 1
                fn = tc.get("function") or {}
                args = fn.get("arguments")
                if not isinstance(args, str):
                    args = json.dumps(args if args is not None else {}, ensure_ascii=False)
                src_id = tc.get("id")
                cid = src_id or f"call_{n}"
                if cid in used:  # the source reuses ids within a run: keep ids unique
                    cid = f"{cid}_{n}"
                used.add(cid)
                pending.append((src_id, cid))
                calls.append({"id": cid, "type": "function",
                              "function": {"name": fn.get("name") or "", "arguments": args}})
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
        elif role == "tool":
            src = m.get("tool_call_id")
            if src:
                match = next((p for p in pending if p[0] == src), None)
            else:
                match = pending[0] if pending else None
            if match is None:
                raise Malformed("tool result without a call")
            pending.remove(match)
            tid = match[1]
            out.append({"role": "tool", "content": text(m.get("content")) or "",
                        "tool_call_id": tid})
        else:
            raise Malformed(f"unknown role {role!r}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    names = git(a.git_dir, "ls-tree", "-r", "--name-only", a.commit).decode().splitlines()
    files = sorted(p for p in names if p.endswith(".json") and (
        p.startswith("historical_trajectories/") or "results" in p.split("/")[:-1]))
    tools_cache = {}
    written = 0
    skipped = {}
    absent = []
    with open(a.out, "w", encoding="utf-8") as f:
        for path in files:
            data = blob_or_none(a.git_dir, a.commit, path)
            if data is None:
                absent.append(path)
                continue
            try:
                runs = json.loads(data)
            except ValueError:
                continue
            if not (isinstance(runs, list) and runs and isinstance(runs[0], dict) and "traj" in runs[0]):
                continue
            stem = path.rsplit("/", 1)[-1][:-len(".json")]
            for i, run in enumerate(runs):
                try:
                    traj = run.get("traj")
                    if not isinstance(traj, list):
                        raise Malformed("no traj")
                    msgs = convert_traj(traj)
                    if not any(x["role"] == "assistant" for x in msgs):
                        raise Malformed("no assistant message")
                except (Malformed, AttributeError, TypeError) as e:
                    why = f"malformed: {e}"
                    skipped[why] = skipped.get(why, 0) + 1
                    continue
                model, domain = model_and_domain(path, traj)
                if domain and domain not in tools_cache:
                    tools_cache[domain] = domain_tools(a.git_dir, a.commit, domain, names)
                r = run.get("reward")
                success = None if r is None else abs(float(r) - 1.0) < 1e-9
                rec = {"id": f"{stem}/{run.get('task_id')}/{run.get('trial')}" + ("" if "trial" in run else f"/{i}"),
                       "source": a.source, "model": model, "success": success, "messages": msgs}
                if domain and tools_cache.get(domain):
                    rec["tools"] = tools_cache[domain]
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                written += 1
    print(f"{a.source}: wrote {written} runs, skipped {sum(skipped.values())} runs; "
          f"{len(absent)} run files absent from this copy", file=sys.stderr)
    for why, k in sorted(skipped.items()):
        print(f"  skipped {k}: {why}", file=sys.stderr)
    for p in absent:
        print(f"  absent blob: {p}", file=sys.stderr)


if __name__ == "__main__":
    main()
