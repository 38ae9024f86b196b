#!/usr/bin/env python3
"""Converts tau2-bench result files (Results JSON: {"info", "tasks", "simulations"}) found in a
sierra-research/tau2-bench commit into OpenAI Chat Completions conversations, one per line.

usage: tau2_bench.py --git-dir GITDIR --commit SHA --source NAME --out FILE.jsonl

Reads git objects only. Result files are looked for in every *.json whose path has a directory
named results, simulations or trajectories (tests/ and data/tau2/domains/ excluded); a file that
is neither a Results JSON nor a bare list of simulations (as some leaderboard submissions are) is
ignored; one whose blob is absent (e.g. a partial copy without big files) is counted and
reported. The same simulation (same `id`) met in several files is written
once.

Conversion, per simulation:
- success: reward_info.reward == 1 (null when there is no reward_info).
- model: info.agent_info.llm; for files under web/leaderboard/public/submissions/<dir>/ the
  submission's own model_name from <dir>/submission.json (the submitter's system/model).
- system message: rebuilt from the agent prompt templates in src/tau2/agent/llm_agent.py at the
  commit that made the file (info.git_commit) if the repository has it, else at the converted
  commit (implementation llm_agent: instructions + domain policy; llm_agent_solo: also the
  task's ticket); for any other implementation, and for leaderboard submissions whose
  submission.json does not say submission_type "standard" (a submitter's own agent), the domain
  policy alone; none when no policy is recorded (bare lists of simulations). The results files
  do not store the system prompt.
- messages: in the recorded order. Assistant tool calls ({id, name, arguments: object}) become
  OpenAI tool_calls; each tool result (role tool, `id` = call id) becomes a tool message.
  In dual-control domains (telecom) the user simulator has its own tools: its tool calls and
  their results (requestor "user") were never shown to the agent and are left out; the user's
  text turns are kept. The agent's hidden `reasoning` is not content and is left out.
"""
import argparse
import ast
import json
import re
import subprocess
import sys

SKIP_PREFIXES = ("tests/", "data/tau2/domains/")
DOMAINS = ("airline", "retail", "telecom-workflow", "telecom", "banking_knowledge", "medical_triage",
           "medical", "mock")


def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True,
                          stdout=subprocess.PIPE).stdout


def blob_or_none(git_dir, commit, path):
    r = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "blob", f"{commit}:{path}"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return r.stdout if r.returncode == 0 else None


def prompt_templates(git_dir, commit):
    """Module-level string constants of src/tau2/agent/llm_agent.py at commit."""
    src = blob_or_none(git_dir, commit, "src/tau2/agent/llm_agent.py")
    consts = {}
    if src is None:
        return consts
    try:
        tree = ast.parse(src.decode())
    except SyntaxError:
        return consts
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            val, method = node.value, None
            # NAME = """...""".strip()
            if isinstance(val, ast.Call) and isinstance(val.func, ast.Attribute) \
                    and val.func.attr in ("strip", "lstrip", "rstrip") and not val.args:
                val, method = val.func.value, val.func.attr
            try:
                v = ast.literal_eval(val)
            except (ValueError, SyntaxError, TypeError):
                continue
            if method and isinstance(v, str):
                v = getattr(v, method)()
            if isinstance(v, str):
                consts[node.targets[0].id] = v
    return consts


def system_prompt(consts, impl, policy, ticket):
    if policy is None:
        return None
    try:
        if impl == "llm_agent" and "SYSTEM_PROMPT" in consts and "AGENT_INSTRUCTION" in consts:
            return consts["SYSTEM_PROMPT"].format(agent_instruction=consts["AGENT_INSTRUCTION"],
                                                  domain_policy=policy)
        if impl == "llm_agent_solo" and ticket and "SYSTEM_PROMPT_SOLO" in consts \
                and "AGENT_SOLO_INSTRUCTION" in consts:
            instr = consts["AGENT_SOLO_INSTRUCTION"].replace("<STOP_FUNCTION_NAME>", "done")
            instr = instr.replace("{stop_function_name}", "done").replace("{stop_token}", "###STOP###")
            return consts["SYSTEM_PROMPT_SOLO"].format(agent_instruction=instr, domain_policy=policy,
                                                       ticket=ticket)
    except (KeyError, IndexError, ValueError):
        pass
    return policy


class Malformed(Exception):
    pass


def text(c):
    if c is None or isinstance(c, str):
        return c
    if isinstance(c, list):
        return "\n".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in c)
    return json.dumps(c, ensure_ascii=False)


def convert_sim(sim, sys_prompt):
    out = []
    if sys_prompt is not None:
        out.append({"role": "system", "content": sys_prompt})
    n = 0
    pending = []  # (id in the source, id written) of agent calls not yet answered, in order
    used = set()
    user_calls = set()
    for m in sim.get("messages") or []:
        role = m.get("role")
        if role == "assistant":
            msg = {"role": "assistant", "content": text(m.get("content"))}
            calls = []
            for tc in m.get("tool_calls") or []:
                n += 1
                src_id = tc.get("id")
                cid = src_id or f"call_{n}"
                if cid in used:  # an id reused within the run: keep ids unique
                    cid = f"{cid}_{n}"
                used.add(cid)
                pending.append((src_id, cid))
                args = tc.get("arguments")
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except ValueError:
                        pass
                if args is None:
                    args = {}
                calls.append({"id": cid, "type": "function",
                              "function": {"name": tc.get("name") or "",
                                           "arguments": args if isinstance(args, str)
                                           else json.dumps(args, ensure_ascii=False)}})
            if calls:
                msg["tool_calls"] = calls
            if msg["content"] is None and not calls:
                msg["content"] = ""
            out.append(msg)
        elif role == "user":
            for tc in m.get("tool_calls") or []:
                user_calls.add(tc.get("id"))
            c = text(m.get("content"))
            if c:
                out.append({"role": "user", "content": c})
            elif not m.get("tool_calls"):
                out.append({"role": "user", "content": c or ""})
        elif role == "tool":
            subs = m.get("tool_messages") or [m]
            for t in subs:
                src = t.get("id")
                match = next((p for p in pending if src and p[0] == src), None)
                if t.get("requestor") == "user" or (match is None and src in user_calls):
                    continue
                if match is None and not src and pending:
                    match = pending[0]
                if match is None:
                    raise Malformed("tool result without an agent call")
                pending.remove(match)
                out.append({"role": "tool", "content": text(t.get("content")) or "",
                            "tool_call_id": match[1]})
        elif role == "system":
            out.append({"role": "system", "content": text(m.get("content"))})
        else:
            raise Malformed(f"unknown role {role!r}")
    return out


def is_candidate(path):
    if not path.endswith(".json") or path.startswith(SKIP_PREFIXES):
        return False
    dirs = path.split("/")[:-1]
    return any(d in ("results", "simulations", "trajectories") for d in dirs)


def main(only_under=None):
    """only_under: if given, only result files whose path starts with it."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    listing = git(a.git_dir, "ls-tree", "-r", a.commit).decode().splitlines()
    files = []
    for line in listing:
        meta, path = line.split("\t", 1)
        _, typ, sha = meta.split()
        if typ == "blob" and is_candidate(path) and (only_under is None or path.startswith(only_under)):
            files.append((path, sha))
    files.sort()
    consts = prompt_templates(a.git_dir, a.commit)
    consts_by_commit = {}

    written = 0
    skipped = {}
    missing_files = []
    seen_blobs = set()
    seen_sims = set()
    used_files = 0
    with open(a.out, "w", encoding="utf-8") as f:
        for path, sha in files:
            if sha in seen_blobs:
                continue
            seen_blobs.add(sha)
            data = blob_or_none(a.git_dir, a.commit, path)
            if data is None:
                missing_files.append(path)
                continue
            try:
                d = json.loads(data)
            except ValueError:
                continue
            if isinstance(d, list) and d and all(isinstance(x, dict) and "messages" in x
                                                 and "reward_info" in x for x in d):
                # A bare list of simulations (some leaderboard submissions): no info, no tasks.
                d = {"info": {}, "simulations": d}
            if not (isinstance(d, dict) and isinstance(d.get("simulations"), list) and "info" in d):
                continue
            used_files += 1
            info = d.get("info") or {}
            agent = info.get("agent_info") or {}
            env = info.get("environment_info") or {}
            model = agent.get("llm")
            impl = agent.get("implementation")
            m = re.match(r"web/leaderboard/public/submissions/([^/]+)/", path)
            if m:
                sub = blob_or_none(a.git_dir, a.commit, f"web/leaderboard/public/submissions/{m.group(1)}/submission.json")
                try:
                    sub = json.loads(sub)
                    model = sub.get("model_name") or model
                    if sub.get("submission_type") != "standard":
                        impl = None  # a submitter's own agent: its prompt is not tau2's
                except (TypeError, ValueError, AttributeError):
                    impl = None
            # The prompt templates of the tau2 version that made the file (info.git_commit) when
            # this repository has that commit, else those of the converted commit.
            gc = info.get("git_commit")
            if gc and gc not in consts_by_commit:
                ok = subprocess.run(["git", "--git-dir", a.git_dir, "cat-file", "-e", f"{gc}^{{commit}}"],
                                    stderr=subprocess.DEVNULL).returncode == 0
                consts_by_commit[gc] = prompt_templates(a.git_dir, gc) if ok else {}
            file_consts = consts_by_commit.get(gc) or consts
            tickets = {str(t.get("id")): t.get("ticket") for t in d.get("tasks") or [] if isinstance(t, dict)}
            stem = path.rsplit("/", 1)[-1][:-len(".json")]
            for sim in d["simulations"]:
                try:
                    sid = sim.get("id")
                    if sid and sid in seen_sims:
                        skipped["duplicate of a simulation in another file"] = \
                            skipped.get("duplicate of a simulation in another file", 0) + 1
                        continue
                    task_id = str(sim.get("task_id"))
                    sp = system_prompt(file_consts, impl, env.get("policy"),
                                       tickets.get(task_id))
                    msgs = convert_sim(sim, sp)
                    if not any(x["role"] == "assistant" for x in msgs):
                        raise Malformed("no assistant message")
                except (Malformed, AttributeError, TypeError) as e:
                    why = f"malformed: {e}"
                    skipped[why] = skipped.get(why, 0) + 1
                    continue
                if sid:
                    seen_sims.add(sid)
                ri = sim.get("reward_info")
                r = ri.get("reward") if isinstance(ri, dict) else None
                success = None if r is None else abs(float(r) - 1.0) < 1e-9
                domain = env.get("domain_name") or next(
                    (x for x in DOMAINS if re.search(rf"(^|[_-]){x}([_-]|$)", stem)), None)
                rec = {"id": f"{stem}/{domain}/{task_id}/{sim.get('trial')}/{sid}",
                       "source": a.source, "model": model, "success": success, "messages": msgs}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                written += 1
    print(f"{a.source}: wrote {written} runs from {used_files} result files, skipped "
          f"{sum(skipped.values())} runs; {len(missing_files)} candidate files absent from this copy",
          file=sys.stderr)
    for why, k in sorted(skipped.items()):
        print(f"  skipped {k}: {why}", file=sys.stderr)
    for p in missing_files:
        print(f"  absent blob: {p}", file=sys.stderr)


if __name__ == "__main__":
    main()
