"""SWE-agent 0.x trajectories (<instance>.traj) as OpenAI Chat Completions conversations, for the
converters beside this file (acr_sweagent_lite.py, multi_swe_bench_java_sweagent.py).

Messages: the trajectory's "history" (what the model saw). system -> system; the issue (and a
demonstration, if any) -> user; each assistant turn -> assistant with its "thought" as content
and its "action" as one tool call; the next user turn (the observation) -> tool message
answering it. SWE-agent acts by text: the tool name is the action's first word when that word
is one of the interface commands listed in the system prompt (open, goto, scroll_down,
scroll_up, create, edit, search_dir, search_file, find_file, submit, ...), else "bash";
arguments are {"command": "<the action exactly as issued, trailing newlines removed>"}. The
last action's observation, when it is only in trajectory[-1] (the submit diff), is added as its
tool message. Turns the harness wrote itself on stopping a run ("Exit due to cost limit",
action exit_cost / exit_context / ...) are not model calls and are left out (counted on
stderr). tools: one spec per interface command (docstring and signature from the system
prompt, one string parameter "command") plus "bash".
"""
import json
import re

from corpus_common import Malformed, check_assistant, command_tool, tally, tool_call


def interface_commands(system_prompt):
    """[(name, docstring, signature)] from the COMMANDS: section of a SWE-agent system prompt."""
    i = system_prompt.find("COMMANDS:")
    if i < 0:
        return []
    text = system_prompt[i + len("COMMANDS:"):]
    out = []
    for m in re.finditer(r"^([A-Za-z_][\w-]*):[ \t]*\n((?:[ \t]+.*\n?)*)", text, re.M):
        body = m.group(2)
        doc = re.search(r"^\s*docstring:\s*(.*)$", body, re.M)
        sig = re.search(r"^\s*signature:\s*(.*)$", body, re.M)
        if not (doc or sig):
            continue
        out.append((m.group(1), doc.group(1).strip() if doc else "", sig.group(1).strip() if sig else m.group(1)))
    return out


def tool_specs(commands):
    specs = [command_tool(name, (doc + " " if doc else "") + f"Usage: {sig}",
                          f"The full command line as typed, e.g. `{sig}`")
             for name, doc, sig in commands]
    specs.append(command_tool(
        "bash", "Run a shell command in the repository (any command that is not one of the interface commands).",
        "The full shell command"))
    return specs


def harness_exit(h):
    action = (h.get("action") or "").strip()
    thought = (h.get("thought") or h.get("content") or "").strip()
    return action.startswith("exit_") and thought.startswith("Exit due to")


def convert(traj, stats):
    """(messages, tools) of a SWE-agent 0.x trajectory; stats counts the turns left out."""
    history = traj.get("history")
    if not isinstance(history, list) or not history:
        raise Malformed("no history")
    system = next((h.get("content") or "" for h in history if h.get("role") == "system"), "")
    commands = interface_commands(system)
    names = {c[0] for c in commands}
    out = []
    pending = None
    n = 0
    for h in history:
        role = h.get("role")
        content = h.get("content")
        if role == "system":
            out.append({"role": "system", "content": content})
        elif role == "user":
            if pending is not None:
                out.append({"role": "tool", "content": content if content is not None else "",
                            "tool_call_id": pending})
                pending = None
            else:
                out.append({"role": "user", "content": content})
        elif role == "assistant":
            if harness_exit(h):
                tally(stats, "harness exit turns left out")
                continue
            if pending is not None:
                raise Malformed("assistant turn after an unanswered action")
            action = h.get("action")
            action = action.rstrip("\n") if isinstance(action, str) else ""
            if action.strip():
                n += 1
                cid = f"call_{n}"
                word = action.strip().split(None, 1)[0]
                name = word if word in names else "bash"
                thought = h.get("thought")
                out.append({"role": "assistant", "content": thought if thought is not None else content,
                            "tool_calls": [tool_call(cid, name, json.dumps({"command": action}, ensure_ascii=False))]})
                pending = cid
            else:
                out.append({"role": "assistant", "content": content})
        else:
            raise Malformed(f"unknown role {role!r}")
    if pending is not None:
        steps = traj.get("trajectory") or []
        last_action = out[-1]["tool_calls"][0]["function"]["arguments"] if out and out[-1].get("tool_calls") else None
        if steps and isinstance(steps[-1], dict) and steps[-1].get("observation") is not None \
                and last_action is not None \
                and json.loads(last_action)["command"].strip() == (steps[-1].get("action") or "").strip():
            out.append({"role": "tool", "content": steps[-1]["observation"], "tool_call_id": pending})
    return check_assistant(out), tool_specs(commands)
