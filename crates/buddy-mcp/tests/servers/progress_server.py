# A stdio MCP server for buddy's tests (2025-11-25 handshake). `flood` sends 300
# progress notifications for its request's token, then answers. `export` runs as a task whose polls report
# `working` ("copying rows"), `input_required` (a question, declined without a
# person), `working` ("writing"), then `completed`. `ask` sends
# `sampling/createMessage` three times and answers with what came back.
import json, sys
polls = 0
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
def task(status, message=None, **more):
    t = {"taskId": "t-1", "status": status, "createdAt": "2026-11-27T12:00:00Z",
         "lastUpdatedAt": "2026-11-27T12:00:00Z", "ttlMs": None, "pollIntervalMs": 20}
    if message:
        t["statusMessage"] = message
    t.update(more)
    return t
ASK = {"who": {"method": "elicitation/create", "params": {"mode": "form",
       "message": "Overwrite the old export?",
       "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}}
for line in sys.stdin:
    msg = json.loads(line)
    method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if mid is None or method is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
              "serverInfo": {"name": "progress", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "flood", "inputSchema": {"type": "object"}},
            {"name": "export", "inputSchema": {"type": "object"}},
            {"name": "ask", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call" and params["name"] == "flood":
        token = params["_meta"]["progressToken"]
        for i in range(1, 301):
            send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                  "progressToken": token, "progress": i, "total": 300, "message": "row %d" % i}})
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "flooded"}]}})
    elif method == "tools/call" and params["name"] == "export":
        polls = 0
        send({"jsonrpc": "2.0", "id": mid, "result": dict(task("working", "queued"), resultType="task")})
    elif method == "tasks/get":
        polls += 1
        if polls == 1:
            body = task("working", "copying rows")
        elif polls == 2:
            body = task("input_required", "waiting for an answer", inputRequests=ASK)
        elif polls == 3:
            body = task("working", "writing")
        else:
            body = task("completed", result={"content": [{"type": "text", "text": "exported 48,213 rows"}]})
        send({"jsonrpc": "2.0", "id": mid, "result": dict(body, resultType="complete")})
    elif method == "tasks/update":
        send({"jsonrpc": "2.0", "id": mid, "result": {"resultType": "complete"}})
    elif method == "tools/call" and params["name"] == "ask":
        said = []
        for n in range(3):
            send({"jsonrpc": "2.0", "id": "s-%d" % n, "method": "sampling/createMessage",
                  "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "line %d" % n}}],
                             "maxTokens": 20}})
            reply = json.loads(sys.stdin.readline())
            if "error" in reply:
                said.append("refused: " + reply["error"]["message"])
            else:
                said.append("got: " + reply["result"]["content"]["text"])
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "\n".join(said)}]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
