//! Servers that crash or hang mid-call: error results, never a stuck turn, and a
//! restart for the next call (bounded).

use std::time::{Duration, Instant};

use buddy_core::SkillError;
use buddy_mcp::{McpServerConfig, McpSource, ServerState};
use serde_json::json;

/// A minimal stdio MCP server in Python: `work` answers, `crash` exits mid-call,
/// `hang` never answers.
const FAKE: &str = r#"
import json, sys, os, time
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    def reply(result):
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
        sys.stdout.flush()
    if method == "initialize":
        reply({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
               "serverInfo": {"name": "fake", "version": "1"}})
    elif method == "tools/list":
        tool = lambda n: {"name": n, "inputSchema": {"type": "object"}}
        reply({"tools": [tool("work"), tool("crash"), tool("hang")]})
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name == "crash":
            os._exit(3)
        if name == "hang":
            time.sleep(3600)
        reply({"content": [{"type": "text", "text": "pid %d" % os.getpid()}]})
    elif mid is not None:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}}) + "\n")
        sys.stdout.flush()
"#;

fn fake(call_timeout_secs: f64) -> std::sync::Arc<McpSource> {
    let mut config = McpServerConfig::stdio("fake", &["python3", "-c", FAKE]);
    config.call_timeout_secs = call_timeout_secs;
    config.max_restarts = 2;
    McpSource::new(config)
}

#[tokio::test]
async fn a_server_that_dies_mid_call_is_an_error_result_then_restarted() {
    let source = fake(20.0);
    source.start().await.unwrap();
    let first = source.call("work", json!({})).await.unwrap();
    let err = source.call("crash", json!({})).await.unwrap_err();
    let SkillError::Failed(message) = err else {
        panic!()
    };
    assert!(
        message.contains("stopped during the call") && message.contains("restarted"),
        "{message}"
    );
    assert!(matches!(source.state(), ServerState::Down(_)));
    // The next call starts a new process.
    let second = source.call("work", json!({})).await.unwrap();
    assert_ne!(first, second, "a new server process answers");
}

#[tokio::test]
async fn a_hanging_call_ends_at_its_timeout_and_the_server_is_replaced() {
    let source = fake(1.0);
    source.start().await.unwrap();
    let first = source.call("work", json!({})).await.unwrap();
    let started = Instant::now();
    let err = source.call("hang", json!({})).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded by the call timeout"
    );
    let SkillError::Failed(message) = err else {
        panic!()
    };
    assert!(
        message.contains("did not answer `hang` within 1s"),
        "{message}"
    );
    let second = source.call("work", json!({})).await.unwrap();
    assert_ne!(first, second, "the hung server was replaced");
}

#[tokio::test]
async fn restarts_are_bounded() {
    let source = fake(20.0);
    source.start().await.unwrap();
    for _ in 0..3 {
        assert!(source.call("crash", json!({})).await.is_err());
    }
    assert!(
        matches!(source.state(), ServerState::GaveUp(_)),
        "{:?}",
        source.state()
    );
    let err = source.call("work", json!({})).await.unwrap_err();
    assert!(
        matches!(err, SkillError::Failed(ref m) if m.contains("not available")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_command_that_does_not_exist_is_named() {
    let source = McpSource::new(McpServerConfig::stdio("ghost", &["/no/such/mcp-server"]));
    let err = source.start().await.unwrap_err().to_string();
    assert!(
        err.contains("ghost") && err.contains("/no/such/mcp-server"),
        "{err}"
    );
}

/// A stdio server whose answer to `flood` is one 20 MiB line: past rmcp's 16 MiB line
/// limit, so the line is dropped and the call ends at its timeout, not in memory.
const FLOOD_STDIO: &str = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    def reply(result):
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
        sys.stdout.flush()
    if method == "initialize":
        reply({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
               "serverInfo": {"name": "flood", "version": "1"}})
    elif method == "tools/list":
        reply({"tools": [{"name": "flood", "inputSchema": {"type": "object"}},
                         {"name": "work", "inputSchema": {"type": "object"}}]})
    elif method == "tools/call":
        if msg["params"]["name"] == "flood":
            sys.stdout.write('{"jsonrpc": "2.0", "id": %d, "result": {"content": [{"type": "text", "text": "' % mid)
            for _ in range(320):
                sys.stdout.write("x" * 65536)
            sys.stdout.write('"}]}}\n')
            sys.stdout.flush()
        else:
            reply({"content": [{"type": "text", "text": "ok"}]})
    elif mid is not None:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}}) + "\n")
        sys.stdout.flush()
"#;

#[tokio::test]
async fn a_stdio_server_flooding_one_line_is_bounded_and_ends_the_call() {
    let mut config = McpServerConfig::stdio("flood", &["python3", "-c", FLOOD_STDIO]);
    config.call_timeout_secs = 3.0;
    let source = McpSource::new(config);
    source.start().await.unwrap();
    let started = Instant::now();
    let err = source.call("flood", json!({})).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(20));
    let SkillError::Failed(message) = err else {
        panic!()
    };
    assert!(message.contains("flood"), "{message}");
    // The server is usable again for the next call.
    assert_eq!(source.call("work", json!({})).await.unwrap(), "ok");
}

/// A Streamable HTTP server whose answer to `flood` is one SSE event carrying a text of
/// argv[2] MiB, then a stream left open.
const FLOOD_HTTP: &str = r#"
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def empty(self, status):
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()
    def do_GET(self):
        self.empty(405)
    def do_DELETE(self):
        self.empty(200)
    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            return self.empty(202)
        if method == "tools/call":
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            try:
                head = '{"jsonrpc": "2.0", "id": %d, "result": {"content": [{"type": "text", "text": "' % mid
                self.wfile.write(b"event: message\ndata: " + head.encode())
                for _ in range(int(sys.argv[2]) * 16):
                    self.wfile.write(b"x" * 65536)
                self.wfile.write(b'"}]}}\n\n')
                self.wfile.flush()
                time.sleep(30)
            except OSError:
                pass
            return
        if method == "initialize":
            answer = {"result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                 "serverInfo": {"name": "flood-http", "version": "1"}}}
        elif method == "tools/list":
            answer = {"result": {"tools": [{"name": "flood", "inputSchema": {"type": "object"}}]}}
        else:
            answer = {"error": {"code": -32601, "message": "no such method"}}
        body = json.dumps({"jsonrpc": "2.0", "id": mid, **answer}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"#;

/// Starts [`FLOOD_HTTP`] sending `mib` MiB, and a source for it.
async fn flood_http(mib: u32) -> (tokio::process::Child, std::sync::Arc<McpSource>) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = tokio::process::Command::new("python3")
        .args(["-c", FLOOD_HTTP, &port.to_string(), &mib.to_string()])
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let started = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(started.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut config = McpServerConfig::http("flood", &format!("http://127.0.0.1:{port}/mcp"));
    config.call_timeout_secs = 10.0;
    let source = McpSource::new(config);
    source.start().await.unwrap();
    (server, source)
}

#[tokio::test]
async fn an_http_server_sending_a_huge_event_is_cut_off_at_the_event_limit() {
    // 1 MiB fits under the 4 MiB event limit and arrives whole...
    let (_server, source) = flood_http(1).await;
    let text = source.call("flood", json!({})).await.unwrap();
    assert_eq!(text.len(), 1024 * 1024);
    // ...25 MiB does not: the call fails at the limit instead of buffering it all.
    let (_server, source) = flood_http(25).await;
    let started = Instant::now();
    let err = source.call("flood", json!({})).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(25));
    let SkillError::Failed(message) = err else {
        panic!()
    };
    assert!(message.contains("MCP server `flood`"), "{message}");
}
