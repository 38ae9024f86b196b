//! MCP servers a request brings on `/v1/chat`: only when the operator allows it, only
//! over HTTP, never with the server's environment.

use std::sync::Arc;

use axum::http::StatusCode;
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_scripted::{Scenario, ScriptedProvider};
use buddy_server::{AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::SqliteStore;
use buddy_testkit::TestToolbox;
use serde_json::json;

use super::approvals::last;
use super::{post, send};

/// server-everything over Streamable HTTP on a free loopback port, stopped when dropped.
struct EverythingHttp {
    child: std::process::Child,
    url: String,
}

impl Drop for EverythingHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn everything_http() -> EverythingHttp {
    let modules = std::env::var_os("BUDDY_MCP_NODE_MODULES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../clients/mcp/node_modules"
            ))
        });
    let bin = modules.join(".bin/mcp-server-everything");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/test.sh (or scripts/mcp-servers.sh)",
        bin.display()
    );
    // A port found free may be taken again before Node binds it (by any socket of the
    // tests running beside this one): a server that exits at once is started again on
    // another port. What it wrote is kept to say why it never listened.
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = tempfile::tempfile().unwrap();
        let mut child = std::process::Command::new(&bin)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(log.try_clone().unwrap())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return EverythingHttp {
                    child,
                    url: format!("http://127.0.0.1:{port}/mcp"),
                };
            }
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            if started.elapsed().as_secs() >= 60 {
                let _ = child.kill();
                panic!(
                    "server-everything did not start within 60 s; it wrote: {}",
                    written(log)
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
    panic!("server-everything exited at start five times over")
}

/// What a child process wrote to `log`.
fn written(mut log: std::fs::File) -> String {
    use std::io::{Read, Seek};
    let mut text = String::new();
    let _ = log.rewind();
    let _ = log.read_to_string(&mut text);
    text
}

/// `scripted:writer`'s script, but calling server-everything's `echo`.
struct Echoer;

impl Backend for Echoer {
    fn models(&self) -> Vec<String> {
        vec!["scripted:echoer".into()]
    }
    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        let script = r#"{"name": "echoer", "prompt": "", "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
          "rules": [
            {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "web__echo", "arguments": {"message": "from the request's server"}}]}},
            {"when": {}, "reply": {"text": "Result: {last_result}"}}]}"#;
        Ok(Resolved {
            provider: Arc::new(ScriptedProvider::new(Arc::new(
                Scenario::parse(script, "test").unwrap(),
            ))),
            toolbox: Arc::new(TestToolbox::new()),
            model: "scripted:echoer".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

#[tokio::test]
async fn a_request_brings_its_own_mcp_server_only_when_the_operator_allows() {
    let everything = everything_http();
    let body = json!({"message": "echo", "mcp": [{"name": "web", "url": everything.url}]});
    let make = |allow: bool| {
        AppState::new(
            Arc::new(SqliteStore::in_memory().unwrap()),
            Arc::new(Echoer),
            PolicyConfig::default(),
            ServerSettings {
                allow_request_mcp: allow,
                ..ServerSettings::default()
            },
        )
    };
    let (status, text) = send(&make(false), post("/v1/chat", body.clone(), None)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("allow_request_mcp"), "{text}");

    let allowed = make(true);
    let (status, text) = send(&allowed, post("/v1/chat", body, None)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(last(&text)["reason"], "completed", "{text}");
    assert!(
        last(&text)["answer"]
            .as_str()
            .unwrap()
            .contains("from the request's server"),
        "{text}"
    );

    // Never a program, never the server's environment.
    for bad in [
        json!({"name": "x", "command": ["sh"], "url": everything.url}),
        json!({"name": "x", "url": everything.url, "headers_env": {"A": "HOME"}}),
        json!({"name": "x", "url": "file:///etc/passwd"}),
    ] {
        let (status, text) = send(
            &allowed,
            post("/v1/chat", json!({"message": "echo", "mcp": [bad]}), None),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    }
}
