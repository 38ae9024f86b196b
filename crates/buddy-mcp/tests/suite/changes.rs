//! Tool list changes (`notifications/tools/list_changed`) and Streamable HTTP servers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use buddy_core::{Message, StopReason, Toolbox};
use buddy_engine::{Engine, TurnRequest};
use buddy_mcp::{McpServerConfig, McpSource, McpToolbox, ServerState};
use buddy_scripted::{Scenario, ScriptedProvider};
use buddy_skills::SkillRegistry;
use serde_json::json;

use super::npm_server;

fn registry() -> buddy_mcp::RegistryFactory {
    Box::new(SkillRegistry::new)
}

fn names(toolbox: &dyn Toolbox) -> Vec<String> {
    toolbox.specs().iter().map(|s| s.name.clone()).collect()
}

#[tokio::test]
async fn server_everything_announces_a_list_change_unprompted_and_it_is_followed() {
    let source = McpSource::new(McpServerConfig::stdio(
        "everything",
        &[&npm_server("mcp-server-everything"), "stdio"],
    ));
    let toolbox = McpToolbox::start(
        Arc::new(SkillRegistry::new()),
        vec![Arc::clone(&source)],
        registry(),
    )
    .await
    .unwrap();
    // It registers more tools once initialized and says so; buddy lists them again.
    let started = Instant::now();
    let (generation, current) = loop {
        let (generation, current) = toolbox.refreshed().await;
        if source.list_changes_seen() > 0
            && names(&*current).contains(&"everything__simulate-research-query".to_owned())
        {
            break (generation, current);
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "no list change followed: seen {}, tools {:?}",
            source.list_changes_seen(),
            names(&*current)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(names(&*current).contains(&"everything__echo".to_owned()));
    let latest = toolbox.latest().await.unwrap();
    assert_eq!(latest.0, generation, "no change since: the same generation");
}

/// A stdio server with one tool, `install`, that adds a tool `extra` and says so.
const GROWING: &str = r#"
import json, sys
tools = ["install"]
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-06-18",
              "capabilities": {"tools": {"listChanged": True}}, "serverInfo": {"name": "growing", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": n, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}} for n in tools]}})
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name == "install" and "extra" not in tools:
            tools.append("extra")
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": name + " done"}]}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
"#;

#[tokio::test]
async fn a_tool_added_mid_turn_is_offered_and_callable_in_the_next_round() {
    let source = McpSource::new(McpServerConfig::stdio("grow", &["python3", "-c", GROWING]));
    let toolbox = McpToolbox::start(Arc::new(SkillRegistry::new()), vec![source], registry())
        .await
        .unwrap();
    assert_eq!(names(&toolbox), ["grow__install"]);
    let script = json!({
        "name": "grow", "prompt": "",
        "expect": {"stop_reason": "completed", "model_calls": 3, "tool_calls": 2},
        "rules": [
            {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "grow__install"}]}},
            {"when": {"round": 2}, "reply": {"tool_calls": [{"name": "grow__extra"}]}},
            {"when": {}, "reply": {"text": "Result: {last_result}"}}
        ]
    });
    let scenario = Scenario::parse(&script.to_string(), "grow").unwrap();
    let engine = Engine::new(
        Arc::new(ScriptedProvider::new(Arc::new(scenario))),
        Arc::new(toolbox),
    );
    let (_, outcome) = engine.run_collect(TurnRequest::new("m", "go")).await;
    assert_eq!(outcome.reason, StopReason::Completed, "{outcome:?}");
    let results: Vec<(&str, bool)> = outcome
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                content, is_error, ..
            } => Some((content.as_str(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(results, [("install done", false), ("extra done", false)]);
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// server-everything over Streamable HTTP on a loopback port (killed when dropped). A
/// port found free may be taken again before Node binds it, by any socket of the tests
/// running beside this one: a server that exits at once is started again on another
/// port. What it wrote is kept to say why it never listened.
async fn everything_over_http() -> (u16, tokio::process::Child) {
    for _ in 0..5 {
        let port = free_port();
        let log = tempfile::tempfile().unwrap();
        let mut server = tokio::process::Command::new(npm_server("mcp-server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(log.try_clone().unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let started = Instant::now();
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return (port, server);
            }
            if server.try_wait().ok().flatten().is_some() {
                break;
            }
            if started.elapsed() >= Duration::from_secs(60) {
                let mut log = log;
                let mut text = String::new();
                use std::io::{Read, Seek};
                let _ = log.rewind();
                let _ = log.read_to_string(&mut text);
                panic!("the HTTP server did not start within 60 s; it wrote: {text}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    panic!("the HTTP server exited at start five times over")
}

#[tokio::test]
async fn a_streamable_http_server_serves_tools() {
    let (port, mut server) = everything_over_http().await;
    let mut config = McpServerConfig::http("web", &format!("http://127.0.0.1:{port}/mcp"));
    config.headers.insert("X-Buddy-Test".into(), "yes".into());
    let source = McpSource::new(config);
    let toolbox = McpToolbox::start(
        Arc::new(SkillRegistry::new()),
        vec![Arc::clone(&source)],
        registry(),
    )
    .await
    .unwrap();
    assert!(names(&toolbox).contains(&"web__echo".to_owned()));
    assert!(
        matches!(source.state(), ServerState::Running { ref protocol, .. } if protocol.as_str() <= "2025-11-25"),
        "{:?}",
        source.state()
    );
    let text = source
        .call("echo", json!({"message": "over http"}))
        .await
        .unwrap();
    assert!(text.contains("over http"), "{text}");
    let _ = server.kill().await;
}

#[tokio::test]
async fn an_http_server_that_is_not_there_is_named_at_startup() {
    let port = free_port();
    let mut config = McpServerConfig::http("absent", &format!("http://127.0.0.1:{port}/mcp"));
    config.startup_timeout_secs = 5.0;
    let started = Instant::now();
    let err = McpToolbox::start(
        Arc::new(SkillRegistry::new()),
        vec![McpSource::new(config)],
        registry(),
    )
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("absent"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[test]
fn an_entry_needs_a_command_or_a_url_not_both() {
    let mut config = McpServerConfig::stdio("x", &[]);
    assert!(config.transport().unwrap_err().contains("no `command`"));
    config.command = vec!["a".into()];
    config.url = Some("http://127.0.0.1:1/mcp".into());
    assert!(config.transport().unwrap_err().contains("both"));
}

/// A skill named `install`, to clash with an MCP tool of the same name.
struct Install;

impl buddy_core::Skill for Install {
    fn name(&self) -> &str {
        "install"
    }
    fn description(&self) -> &str {
        "a local skill"
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    fn execute<'a>(
        &'a self,
        _args: serde_json::Value,
        _ctx: buddy_core::SkillContext,
    ) -> buddy_core::BoxFuture<'a, Result<String, buddy_core::SkillError>> {
        Box::pin(async { Ok("local".to_owned()) })
    }
}

#[tokio::test]
async fn an_mcp_tool_named_like_a_skill_is_refused_naming_it() {
    let mut base = SkillRegistry::new();
    base.register(Arc::new(Install)).unwrap();
    let mut config = McpServerConfig::stdio("grow", &["python3", "-c", GROWING]);
    config.tool_prefix = Some(String::new());
    let err = McpToolbox::start(Arc::new(base), vec![McpSource::new(config)], registry())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("`install`") && err.contains("tool_prefix"),
        "{err}"
    );
}
