//! A durable turn killed (SIGKILL) while an HTTP MCP server runs its call as a task:
//! the task is recorded with its call, and the next turn after the restart waits on the
//! same task for its result instead of answering the call as interrupted.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::crash::{conversation, spawn_buddy};
use super::server::{client, sse_events, start_chat};

/// A Streamable HTTP MCP server (legacy handshake, JSON answers) whose `export` runs as
/// a task: `tasks/get` says `working` until the file `done` exists in its directory,
/// then `completed`. Every request's method and params go to `requests.jsonl`.
const JOBS: &str = r#"
import json, os
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
here = os.path.dirname(os.path.abspath(__file__))
log = open(os.path.join(here, "requests.jsonl"), "a")
def task(tid, status, **more):
    t = {"taskId": tid, "status": status, "createdAt": "2026-11-27T12:00:00Z",
         "lastUpdatedAt": "2026-11-27T12:00:00Z", "ttlMs": None, "pollIntervalMs": 50}
    t.update(more)
    return t
class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args): pass
    def send(self, code, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self.send(405)
    def do_DELETE(self):
        self.send(200)
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        log.write(json.dumps({"method": method, "params": params}) + "\n"); log.flush()
        if mid is None:
            return self.send(202)
        if method == "initialize":
            result = {"protocolVersion": "2025-11-25",
                      "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
                      "serverInfo": {"name": "jobs", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "export", "inputSchema": {"type": "object"},
                                 "annotations": {"readOnlyHint": True}}]}
        elif method == "tools/call":
            result = dict(task("t-export", "working"), resultType="task")
        elif method == "tasks/get":
            if os.path.exists(os.path.join(here, "done")):
                body = task(params["taskId"], "completed",
                            result={"content": [{"type": "text", "text": "exported 48,213 rows"}]})
            else:
                body = task(params["taskId"], "working")
            result = dict(body, resultType="complete")
        elif method == "tasks/cancel":
            result = {"resultType": "complete"}
        else:
            return self.send(200, {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
        self.send(200, {"jsonrpc": "2.0", "id": mid, "result": result})
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_port, flush=True)
server.serve_forever()
"#;

/// The model asks for `jobs__export` while the conversation has no result, then answers
/// with what came back.
const EXPORT: &str = r#"{"name": "export_task", "prompt": "export it",
  "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
  "rules": [
    {"when": {"tool_results": 0}, "reply": {"text": "Exporting.", "tool_calls": [{"name": "jobs__export", "arguments": {}}]}},
    {"when": {}, "reply": {"text": "Result: {last_result}"}}]}"#;

/// The requests the jobs server got, as (method, params).
fn requests(dir: &Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|r| {
            (
                r["method"].as_str().unwrap_or("").to_owned(),
                r["params"].clone(),
            )
        })
        .collect()
}

fn count(dir: &Path, method: &str) -> usize {
    requests(dir).iter().filter(|(m, _)| m == method).count()
}

/// Waits (bounded) until `ready` holds.
async fn until(what: &str, ready: impl Fn() -> bool) {
    for _ in 0..200 {
        if ready() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never happened: {what}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_running_when_the_server_is_killed_is_waited_on_again_after_the_restart() {
    let (dir, scenarios) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(scenarios.path().join("export_task.json"), EXPORT).unwrap();
    let jobs_dir = tempfile::tempdir().unwrap();
    let jobs = super::PythonServer::start(jobs_dir.path(), "jobs.py", JOBS);
    let port = jobs.port;
    // The model: `buddy mock-server` playing the scenario over the OpenAI API.
    let mock_args = [
        "mock-server".as_ref(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--scenarios".as_ref(),
        scenarios.path().as_os_str(),
    ];
    let (mock, mock_url) = spawn_buddy(&mock_args, dir.path(), &[]);
    // Stopped however the test ends.
    let _mock = Stopped(mock);
    std::fs::write(
        dir.path().join("buddy.toml"),
        format!(
            "default_provider = \"mock\"\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{mock_url}\"\nmodel = \"scripted:export_task\"\n\
             [[mcp]]\nname = \"jobs\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
        ),
    )
    .unwrap();
    let db = dir.path().join("tasks.db");
    let args = [
        "--config".as_ref(),
        "buddy.toml".as_ref(),
        "serve".as_ref(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
    ];
    let (server, url) = spawn_buddy(&args, dir.path(), &[]);
    let mut server = Stopped(server);

    let (response, id) = start_chat(&url, json!({"message": "export it"})).await;
    // The call became a task and buddy is polling it: kill the server mid-task.
    until("the task is polled", || {
        count(jobs_dir.path(), "tasks/get") >= 2
    })
    .await;
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    drop(response);
    assert_eq!(count(jobs_dir.path(), "tools/call"), 1);

    // The job finishes while buddy is down; a restarted buddy continues the conversation.
    std::fs::write(jobs_dir.path().join("done"), "").unwrap();
    let (restarted, url) = spawn_buddy(&args, dir.path(), &[]);
    let _server = Stopped(restarted);
    let body = client()
        .post(format!("{url}/v1/chat"))
        .json(&json!({"conversation_id": id, "message": "and?", "provider": "mock"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = sse_events(&body);
    let last = events.last().unwrap_or_else(|| panic!("no events: {body}"));
    assert_eq!(last.1["reason"], "completed", "{body}");
    let resumed = events
        .iter()
        .find(|(name, _)| name == "tool_call_result")
        .unwrap_or_else(|| panic!("no result event for the resumed call: {body}"));
    assert_eq!(resumed.1["content"], "exported 48,213 rows", "{body}");

    let detail = conversation(&url, &id).await;
    let messages = detail["messages"].as_array().unwrap();
    assert_eq!(messages[1]["tool_calls"][0]["name"], "jobs__export");
    assert_eq!(messages[2]["role"], "tool", "{messages:?}");
    assert_eq!(
        messages[2]["content"], "exported 48,213 rows",
        "{messages:?}"
    );
    // The tool ran once; after the restart buddy only asked about the same task.
    assert_eq!(
        count(jobs_dir.path(), "tools/call"),
        1,
        "{:?}",
        requests(jobs_dir.path())
    );
    assert!(
        requests(jobs_dir.path())
            .iter()
            .filter(|(m, _)| m == "tasks/get")
            .all(|(_, p)| p["taskId"] == "t-export")
    );
}

/// A child process killed when dropped, so a failing test leaves none behind.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
