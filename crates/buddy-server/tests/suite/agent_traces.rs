//! A tree of agents as a tracing backend receives it (issue 45, item 6): each sub-agent's
//! turn an `invoke_agent` span under the tool call that started it, in the caller's trace,
//! with its own model and tool calls as its children and its call counts as attributes.

use std::sync::Arc;

use axum::http::StatusCode;
use buddy_engine::PolicyConfig;
use buddy_server::{AppState, ServerSettings};
use buddy_store::SqliteStore;
use buddy_telemetry::{Telemetry, TelemetryConfig};
use serde_json::json;

use super::agents::Tree;
use super::send;
use super::telemetry::{caller, named, receiver, spans_of, traced_post};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sub_agent_is_an_invoke_agent_span_under_its_tool_call() {
    let receiver = receiver().await;
    let telemetry = Arc::new(
        Telemetry::start(&TelemetryConfig {
            endpoint: Some(format!("{}/v1/traces", receiver.url)),
            ..TelemetryConfig::default()
        })
        .unwrap(),
    );
    let state = AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Tree {
            agents: true,
            sandbox: tempfile::tempdir().unwrap(),
        }),
        PolicyConfig::default(),
        ServerSettings {
            telemetry: Some(Arc::clone(&telemetry)),
            ..ServerSettings::default()
        },
    );
    let trace = "5af92f3577b34da6a3ce929d0e0e4737";
    let (status, body) = send(
        &state,
        traced_post("/v1/chat", json!({"message": "go"}), &caller(trace)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    state.wait_for_turns().await;
    // Every span of the tree is in the caller's trace.
    let spans = spans_of(&telemetry, &receiver, trace).await;
    let top = named(&spans, "invoke_agent buddy");
    assert_eq!(top.len(), 1, "{spans:#?}");
    let top = top[0];
    assert_eq!(top.parent(), "00f067aa0ba902b7");
    assert_eq!(top.int("buddy.model_calls"), Some(6), "the tree's calls");
    assert_eq!(top.int("buddy.delegated.agents"), Some(2));
    assert_eq!(top.int("buddy.delegated.model_calls"), Some(4));
    assert_eq!(top.int("buddy.delegated.tool_calls"), Some(2));
    // The top level's own: two model calls and its two calls to `helper`.
    let own_chats = spans
        .iter()
        .filter(|s| s.span.name.starts_with("chat ") && s.parent() == top.id())
        .count();
    assert_eq!(own_chats, 2);
    let delegations = named(&spans, "execute_tool helper");
    assert_eq!(delegations.len(), 2, "{spans:#?}");
    let children = named(&spans, "invoke_agent helper");
    assert_eq!(children.len(), 2, "{spans:#?}");
    for call in &delegations {
        assert_eq!(call.parent(), top.id());
        let id = call.text("gen_ai.tool.call.id");
        // One sub-agent under each call, named for its agent and its call.
        let under: Vec<_> = children
            .iter()
            .filter(|c| c.parent() == call.id())
            .collect();
        assert_eq!(under.len(), 1, "{spans:#?}");
        let child = under[0];
        assert_eq!(
            child.text("gen_ai.operation.name").as_deref(),
            Some("invoke_agent")
        );
        assert_eq!(child.text("gen_ai.agent.name").as_deref(), Some("helper"));
        assert_eq!(child.text("gen_ai.tool.call.id"), id);
        assert_eq!(
            child.text("buddy.stop_reason").as_deref(),
            Some("completed")
        );
        // Its own calls, as attributes and as its children.
        assert_eq!(child.int("buddy.model_calls"), Some(2));
        assert_eq!(child.int("buddy.tool_calls"), Some(1));
        assert_eq!(child.int("buddy.delegated.agents"), None);
        let chats: Vec<_> = spans
            .iter()
            .filter(|s| s.span.name.starts_with("chat ") && s.parent() == child.id())
            .collect();
        assert_eq!(chats.len(), 2, "{spans:#?}");
        let tools: Vec<_> = spans
            .iter()
            .filter(|s| s.span.name.starts_with("execute_tool") && s.parent() == child.id())
            .collect();
        assert_eq!(tools.len(), 1, "{spans:#?}");
        assert_eq!(tools[0].span.name, "execute_tool lookup");
    }
    // Nothing of the tree is left outside it: 1 + 2 agents, 6 chats, 4 tool calls.
    assert_eq!(spans.len(), 3 + 6 + 4, "{spans:#?}");
}
