# A stdio MCP server for buddy's tests, speaking the tasks of 2025-11-25 (SEP-1686).
# `slow` takes only task-augmented calls and never ends (its polls say "step N");
# `locked` says it takes only task-augmented calls and refuses them too. What buddy
# asked (methods, task ids) is appended to the file argv[1].
import json, sys
log = open(sys.argv[1], "a")
polls = 0
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
def note(line):
    log.write(line + "\n"); log.flush()
def task(status, message=None):
    t = {"taskId": "t-1", "status": status, "createdAt": "2026-11-27T12:00:00Z",
         "lastUpdatedAt": "2026-11-27T12:00:00Z", "ttl": 60000, "pollInterval": 50}
    if message:
        t["statusMessage"] = message
    return t
REQUIRED = {"taskSupport": "required"}
for line in sys.stdin:
    msg = json.loads(line)
    method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if mid is None or method is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}},
              "serverInfo": {"name": "tasks-2025", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "slow", "inputSchema": {"type": "object"}, "execution": REQUIRED},
            {"name": "locked", "inputSchema": {"type": "object"}, "execution": REQUIRED}]}})
    elif method == "tools/call" and "task" not in params:
        note("plain " + params["name"])
        send({"jsonrpc": "2.0", "id": mid, "result": {"isError": True, "content": [{"type": "text",
              "text": "Tool %s requires task augmentation (taskSupport: 'required')" % params["name"]}]}})
    elif method == "tools/call" and params["name"] == "slow":
        note("task slow ttl %s" % params["task"].get("ttl"))
        send({"jsonrpc": "2.0", "id": mid, "result": {"task": task("working", "queued")}})
    elif method == "tools/call":
        note("task " + params["name"])
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "tasks are switched off here"}})
    elif method == "tasks/get":
        polls += 1
        send({"jsonrpc": "2.0", "id": mid, "result": task("working", "step %d" % polls)})
    elif method == "tasks/cancel":
        note("cancel " + params["taskId"])
        send({"jsonrpc": "2.0", "id": mid, "result": task("cancelled")})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
