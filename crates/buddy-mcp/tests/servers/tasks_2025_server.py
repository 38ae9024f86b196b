# A stdio MCP server for buddy's tests, speaking the tasks of 2025-11-25 (SEP-1686).
# `slow` takes only task-augmented calls and never ends (its polls say "step N");
# `locked` says it takes only task-augmented calls and refuses them too; `sneaky`
# lists no `execution` yet refuses plain calls as a task-only tool does, and as a task
# it completes at the second poll. With argv[2] == "no-tasks" the server declares no
# tasks. What buddy asked (methods, task ids) is appended to the file argv[1].
import json, sys
log = open(sys.argv[1], "a")
declare_tasks = len(sys.argv) < 3 or sys.argv[2] != "no-tasks"
tasks = {}
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
def note(line):
    log.write(line + "\n"); log.flush()
def task(tid, status, message=None):
    t = {"taskId": tid, "status": status, "createdAt": "2026-11-27T12:00:00Z",
         "lastUpdatedAt": "2026-11-27T12:00:00Z", "ttl": 60000, "pollInterval": 50}
    if message:
        t["statusMessage"] = message
    return t
def state(tid):
    name, polls = tasks[tid]
    if name == "sneaky" and polls >= 2:
        return task(tid, "completed")
    return task(tid, "working", "step %d" % polls)
REQUIRED = {"taskSupport": "required"}
capabilities = {"tools": {}}
if declare_tasks:
    capabilities["tasks"] = {"cancel": {}, "requests": {"tools": {"call": {}}}}
for line in sys.stdin:
    msg = json.loads(line)
    method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if mid is None or method is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": capabilities, "serverInfo": {"name": "tasks-2025", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "slow", "inputSchema": {"type": "object"}, "execution": REQUIRED},
            {"name": "locked", "inputSchema": {"type": "object"}, "execution": REQUIRED},
            {"name": "sneaky", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call" and "task" not in params:
        note("plain " + params["name"])
        send({"jsonrpc": "2.0", "id": mid, "result": {"isError": True, "content": [{"type": "text",
              "text": "Tool %s requires task augmentation (taskSupport: 'required')" % params["name"]}]}})
    elif method == "tools/call" and params["name"] in ("slow", "sneaky"):
        tid = "t-%d" % (len(tasks) + 1)
        tasks[tid] = [params["name"], 0]
        note("task %s %s ttl %s" % (params["name"], tid, params["task"].get("ttl")))
        send({"jsonrpc": "2.0", "id": mid, "result": {"task": task(tid, "working", "queued")}})
    elif method == "tools/call":
        note("task " + params["name"])
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "tasks are switched off here"}})
    elif method == "tasks/get":
        tasks[params["taskId"]][1] += 1
        send({"jsonrpc": "2.0", "id": mid, "result": state(params["taskId"])})
    elif method == "tasks/result":
        note("result " + params["taskId"])
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "sneaky done"}]}})
    elif method == "tasks/cancel":
        note("cancel " + params["taskId"])
        send({"jsonrpc": "2.0", "id": mid, "result": task(params["taskId"], "cancelled")})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
