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
import ast
import json
import re
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ beside the scripts
import corpus_common as cc  # noqa: E402
from corpus_common import Malformed, blob_or_none  # noqa: E402
from corpus_common import flat_text as text  # noqa: E402


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


def convert_traj(traj):
    out = []
    ids = cc.CallIds()  # the source reuses ids within a run: keep ids unique
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
                fn = tc.get("function") or {}
                args = cc.json_args(fn.get("arguments"))
                calls.append(cc.tool_call(ids.new(tc.get("id")), fn.get("name") or "", args))
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
        elif role == "tool":
            src = m.get("tool_call_id")
            match = ids.find(src) if src else ids.first()
            if match is None:
                raise Malformed("tool result without a call")
            out.append({"role": "tool", "content": text(m.get("content")) or "",
                        "tool_call_id": ids.answer(match)})
        else:
            raise Malformed(f"unknown role {role!r}")
    return out


def main():
    a = cc.arg_parser().parse_args()

    names = cc.file_names(a.git_dir, a.commit)
    files = sorted(p for p in names if p.endswith(".json") and (
        p.startswith("historical_trajectories/") or "results" in p.split("/")[:-1]))
    tools_cache = {}
    with cc.Output(a) as out:
        for path in files:
            data = out.run_file(path)
            if data is None:
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
                    msgs = cc.check_assistant(convert_traj(traj))
                except (Malformed, AttributeError, TypeError) as e:
                    out.skip(f"malformed: {e}")
                    continue
                model, domain = model_and_domain(path, traj)
                if domain and domain not in tools_cache:
                    tools_cache[domain] = domain_tools(a.git_dir, a.commit, domain, names)
                success = cc.reward_success(run.get("reward"))
                out.add(f"{stem}/{run.get('task_id')}/{run.get('trial')}" + ("" if "trial" in run else f"/{i}"),
                        model, success, msgs, tools_cache.get(domain) if domain else None)
    out.report(f"wrote {out.written} runs, skipped {sum(out.skipped.values())} runs; "
               f"{len(out.absent)} run files absent from this copy", skip_label="skipped ")


if __name__ == "__main__":
    main()
