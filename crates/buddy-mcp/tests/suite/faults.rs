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
