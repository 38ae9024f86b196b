//! Turns that use tools of the real reference servers.

use std::sync::Arc;

use buddy_core::{Message, RepeatSemantics, Skill, SkillError, StopReason};
use buddy_engine::{Engine, TurnRequest};
use buddy_mcp::{McpServerConfig, McpSkill, McpSource, ServerState};
use buddy_scripted::{Scenario, ScriptedProvider};
use buddy_skills::SkillRegistry;
use serde_json::json;

use super::{npm_server, time_server};

/// A scripted model that calls `tool` with `args` once, then answers with the result.
fn one_call(tool: &str, args: serde_json::Value) -> Arc<ScriptedProvider> {
    let script = json!({
        "name": "mcp", "prompt": "",
        "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
        "rules": [
            {"when": {"round": 1}, "reply": {"tool_calls": [{"name": tool, "arguments": args}]}},
            {"when": {}, "reply": {"text": "Result: {last_result}"}}
        ]
    });
    let scenario = Scenario::parse(&script.to_string(), "mcp test").unwrap();
    Arc::new(ScriptedProvider::new(Arc::new(scenario)))
}

async fn skills_of(config: McpServerConfig) -> (Arc<McpSource>, Vec<Arc<dyn Skill>>) {
    let source = McpSource::new(config);
    let skills = McpSkill::all(Arc::clone(&source)).await.unwrap();
    (source, skills)
}

/// Runs one scripted turn calling `tool` over `skills`; returns the tool's result as
/// the model saw it.
async fn turn(skills: Vec<Arc<dyn Skill>>, tool: &str, args: serde_json::Value) -> String {
    let mut registry = SkillRegistry::new();
    registry.register_all(skills).unwrap();
    let engine = Engine::new(one_call(tool, args), Arc::new(registry));
    let (_, outcome) = engine.run_collect(TurnRequest::new("m", "go")).await;
    assert_eq!(outcome.reason, StopReason::Completed, "{outcome:?}");
    outcome
        .new_messages()
        .iter()
        .find_map(|m| match m {
            Message::Tool {
                content,
                is_error: false,
                ..
            } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no successful tool result: {:?}", outcome.messages))
}

#[tokio::test]
async fn the_time_server_tells_the_time_in_a_turn() {
    let (source, skills) = skills_of(McpServerConfig::stdio("time", &[&time_server()])).await;
    let names: Vec<&str> = skills.iter().map(|s| s.name()).collect();
    assert!(names.contains(&"time__get_current_time"), "{names:?}");
    assert!(names.contains(&"time__convert_time"), "{names:?}");
    let ServerState::Running { protocol, .. } = source.state() else {
        panic!("{:?}", source.state())
    };
    // mcp-server-time speaks the 2026-07-28 revision: buddy's `server/discover` finds it.
    assert_eq!(protocol, "2026-07-28");

    let answer = turn(
        skills,
        "time__get_current_time",
        json!({"timezone": "Europe/Paris"}),
    )
    .await;
    assert!(
        answer.contains("Europe/Paris") && answer.contains("datetime"),
        "{answer}"
    );

    // The Python server answers an unknown tool with JSON-RPC error -32602: an error
    // result the model reads, and the server stays up.
    let err = source.call("no_such_tool", json!({})).await.unwrap_err();
    let SkillError::Failed(message) = err else {
        panic!()
    };
    assert!(
        message.contains("-32602") && message.contains("no_such_tool"),
        "{message}"
    );
    assert!(
        source
            .call("get_current_time", json!({"timezone": "UTC"}))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn the_everything_server_echoes_and_reports_errors() {
    let (source, skills) = skills_of(McpServerConfig::stdio(
        "every",
        &[&npm_server("mcp-server-everything"), "stdio"],
    ))
    .await;
    let answer = turn(
        skills.clone(),
        "every__echo",
        json!({"message": "hello mcp"}),
    )
    .await;
    assert!(answer.contains("hello mcp"), "{answer}");
    // The TypeScript servers answer an unknown tool with an `isError` result.
    let err = source.call("no_such_tool", json!({})).await.unwrap_err();
    assert!(
        matches!(err, SkillError::Failed(ref m) if m.contains("no_such_tool")),
        "{err:?}"
    );
    // Its annotations say echo is read-only and idempotent.
    let echo = skills.iter().find(|s| s.name() == "every__echo").unwrap();
    assert_eq!(echo.semantics(), RepeatSemantics::Pure);
}

#[tokio::test]
async fn the_filesystem_server_reads_a_file_in_its_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.md"), "buy oat milk").unwrap();
    let root_arg = root.display().to_string();
    let (_, skills) = skills_of(McpServerConfig::stdio(
        "fs",
        &[&npm_server("mcp-server-filesystem"), &root_arg],
    ))
    .await;
    let read = skills
        .iter()
        .find(|s| s.name() == "fs__read_text_file")
        .unwrap();
    // Read-only by its annotations (not declared idempotent): run again, judged by result.
    assert_eq!(read.semantics(), RepeatSemantics::Observed);
    // write_file is destructive: never silently re-run.
    let write = skills
        .iter()
        .find(|s| s.name() == "fs__write_file")
        .unwrap();
    assert_eq!(write.semantics(), RepeatSemantics::Effectful);
    let path = root.join("notes.md").display().to_string();
    let answer = turn(skills, "fs__read_text_file", json!({"path": path})).await;
    assert!(answer.contains("buy oat milk"), "{answer}");
}

#[tokio::test]
async fn the_memory_server_keeps_what_it_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = McpServerConfig::stdio("memory", &[&npm_server("mcp-server-memory")]);
    config.env.insert(
        "MEMORY_FILE_PATH".into(),
        dir.path().join("memory.jsonl").display().to_string(),
    );
    let (source, skills) = skills_of(config).await;
    let answer = turn(
        skills,
        "memory__create_entities",
        json!({"entities": [{"name": "Ada", "entityType": "person", "observations": ["likes tea"]}]}),
    )
    .await;
    assert!(answer.contains("Ada"), "{answer}");
    let graph = source.call("read_graph", json!({})).await.unwrap();
    assert!(graph.contains("likes tea"), "{graph}");
}

#[tokio::test]
async fn two_servers_with_one_name_collide_loudly() {
    let time = time_server();
    let (_, first) = skills_of(McpServerConfig::stdio("time", &[&time])).await;
    let (_, second) = skills_of(McpServerConfig::stdio("time", &[&time])).await;
    let mut registry = SkillRegistry::new();
    registry.register_all(first).unwrap();
    let err = registry.register_all(second).unwrap_err();
    assert!(err.to_string().contains("time__"), "{err}");
    // Another prefix keeps both.
    let mut other = McpServerConfig::stdio("time", &[&time]);
    other.tool_prefix = Some("clock".into());
    let (_, third) = skills_of(other).await;
    registry.register_all(third).unwrap();
}

/// The `everything` server's `get-env` tool reports the environment it started with:
/// only the baseline, what `env_passthrough` names and `env` — nothing else of the
/// process that started it (this test's own `CARGO_*` variables stand in for API keys).
#[tokio::test]
async fn an_mcp_server_starts_with_a_clean_environment() {
    let mut config =
        McpServerConfig::stdio("every", &[&npm_server("mcp-server-everything"), "stdio"]);
    config
        .env
        .insert("BUDDY_SET_FOR_IT".into(), "visible".into());
    config.env_passthrough.push("CARGO_PKG_NAME".into());
    let (source, _) = skills_of(config).await;
    let env = match source.call("get-env", json!({})).await {
        Ok(text) => text,
        Err(e) => panic!("get-env failed: {e:?}"),
    };
    assert!(
        env.contains("BUDDY_SET_FOR_IT") && env.contains("visible"),
        "{env}"
    );
    assert!(env.contains("CARGO_PKG_NAME"), "passed through: {env}");
    assert!(env.contains("\"PATH\""), "the baseline: {env}");
    for secret in [
        "CARGO_MANIFEST_DIR",
        "CARGO_PKG_VERSION",
        "RUST_TEST_THREADS",
    ] {
        assert!(!env.contains(secret), "{secret} leaked: {env}");
    }
}
