//! What `buddy mcp list` says of MCP servers in words a person reads (issue 58, item 7):
//! an HTTP server nobody listens for is "connection refused at <its URL>", never the
//! transport's Rust type names; a server that gives no version is named alone.

use std::path::Path;
use std::process::{Output, Stdio};

fn buddy(dir: &Path, args: &[&str]) -> Output {
    super::buddy(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn an_http_server_nobody_listens_for_is_connection_refused_at_its_url() {
    let dir = tempfile::tempdir().unwrap();
    // A port that was free a moment ago: nothing listens on it now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    std::fs::write(
        dir.path().join("buddy.toml"),
        format!("[[mcp]]\nname = \"web\"\nurl = \"{url}\"\n"),
    )
    .unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("connection refused at {url}")),
        "{stdout}"
    );
    for type_name in [
        "rmcp::",
        "WorkerTransport",
        "reqwest::",
        "Send message error",
    ] {
        assert!(!stdout.contains(type_name), "{type_name}: {stdout}");
    }
}

/// A stdio server whose `serverInfo` has an empty version.
const NAMELESS_VERSION: &str = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    mid = msg.get("id")
    if mid is None:
        continue
    if msg.get("method") == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "plain", "version": ""}}
    elif msg.get("method") == "tools/list":
        result = {"tools": [{"name": "hello", "inputSchema": {"type": "object"}}]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
    sys.stdout.flush()
"#;

#[test]
fn a_server_without_a_version_is_named_alone() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plain.py"), NAMELESS_VERSION).unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        "[[mcp]]\nname = \"plain\"\ncommand = [\"python3\", \"plain.py\"]\n",
    )
    .unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("running: plain, protocol 2025-06-18"),
        "{stdout}"
    );
    assert!(!stdout.contains(" ,"), "{stdout}");
}
