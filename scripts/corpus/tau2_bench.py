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
import ast
import json
import re
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ beside the scripts
import corpus_common as cc  # noqa: E402
from corpus_common import Malformed, blob_or_none  # noqa: E402
from corpus_common import flat_text as text  # noqa: E402

SKIP_PREFIXES = ("tests/", "data/tau2/domains/")
DOMAINS = ("airline", "retail", "telecom-workflow", "telecom", "banking_knowledge", "medical_triage",
           "medical", "mock")


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


def convert_sim(sim, sys_prompt):
    out = []
    if sys_prompt is not None:
        out.append({"role": "system", "content": sys_prompt})
    ids = cc.CallIds()  # of the agent's calls
    user_calls = set()
    for m in sim.get("messages") or []:
        role = m.get("role")
        if role == "assistant":
            msg = {"role": "assistant", "content": text(m.get("content"))}
            calls = []
            for tc in m.get("tool_calls") or []:
                cid = ids.new(tc.get("id"))
                args = tc.get("arguments")
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except ValueError:
                        pass
                calls.append(cc.tool_call(cid, tc.get("name") or "", cc.json_args(args)))
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
                match = ids.find(src)
                if t.get("requestor") == "user" or (match is None and src in user_calls):
                    continue
                if match is None and not src:
                    match = ids.first()
                if match is None:
                    raise Malformed("tool result without an agent call")
                out.append({"role": "tool", "content": text(t.get("content")) or "",
                            "tool_call_id": ids.answer(match)})
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
    a = cc.arg_parser().parse_args()

    listing = cc.git(a.git_dir, "ls-tree", "-r", a.commit).decode().splitlines()
    files = []
    for line in listing:
        meta, path = line.split("\t", 1)
        _, typ, sha = meta.split()
        if typ == "blob" and is_candidate(path) and (only_under is None or path.startswith(only_under)):
            files.append((path, sha))
    files.sort()
    consts = prompt_templates(a.git_dir, a.commit)
    consts_by_commit = {}

    seen_blobs = set()
    seen_sims = set()
    used_files = 0
    with cc.Output(a) as out:
        for path, sha in files:
            if sha in seen_blobs:
                continue
            seen_blobs.add(sha)
            data = out.run_file(path)
            if data is None:
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
                consts_by_commit[gc] = prompt_templates(a.git_dir, gc) if cc.has_commit(a.git_dir, gc) else {}
            file_consts = consts_by_commit.get(gc) or consts
            tickets = {str(t.get("id")): t.get("ticket") for t in d.get("tasks") or [] if isinstance(t, dict)}
            stem = path.rsplit("/", 1)[-1][:-len(".json")]
            for sim in d["simulations"]:
                try:
                    sid = sim.get("id")
                    if sid and sid in seen_sims:
                        out.skip("duplicate of a simulation in another file")
                        continue
                    task_id = str(sim.get("task_id"))
                    sp = system_prompt(file_consts, impl, env.get("policy"),
                                       tickets.get(task_id))
                    msgs = cc.check_assistant(convert_sim(sim, sp))
                except (Malformed, AttributeError, TypeError) as e:
                    out.skip(f"malformed: {e}")
                    continue
                if sid:
                    seen_sims.add(sid)
                ri = sim.get("reward_info")
                success = cc.reward_success(ri.get("reward") if isinstance(ri, dict) else None)
                domain = env.get("domain_name") or next(
                    (x for x in DOMAINS if re.search(rf"(^|[_-]){x}([_-]|$)", stem)), None)
                out.add(f"{stem}/{domain}/{task_id}/{sim.get('trial')}/{sid}", model, success, msgs)
    out.report(f"wrote {out.written} runs from {used_files} result files, skipped "
               f"{sum(out.skipped.values())} runs; {len(out.absent)} candidate files absent from this copy",
               skip_label="skipped ")


if __name__ == "__main__":
    main()
