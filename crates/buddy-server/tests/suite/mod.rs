//! The router driven with `oneshot`, no socket: auth, errors, models, a whole SSE turn.

mod agent_crash;
mod agent_traces;
mod agents;
mod approvals;
mod attachments;
mod client_tools;
mod compact;
mod connections;
mod contract;
mod cors;
mod counts;
mod elicitations;
mod health;
mod hostile_mcp;
mod instances;
mod instances_answers;
mod messages;
mod messages_claude_code;
mod messages_contract;
mod messages_upstreams;
mod pg_connections;
mod prompt_cache_key;
mod reattach;
mod replay;
mod request_mcp;
mod response_tree;
mod responses;
mod responses_codex;
mod responses_exact;
mod responses_ws;
mod retention;
mod sampling;
mod sessions;
mod settings;
mod sharing;
mod shedding;
mod spend_gate;
mod spend_gate_routes;
mod spend_holds;
mod spend_ledger_instances;
mod stored_items;
mod telemetry;
mod tool_progress;
mod web;
mod ws_limits;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_scripted::{Scenario, ScriptedProvider};
use buddy_server::{ApiKey, AppState, Backend, BackendError, Resolved, ServerSettings, app};
use buddy_store::SqliteStore;
use buddy_testkit::TestToolbox;
use serde_json::{Value, json};
use tower::ServiceExt;

/// One scripted model that greets.
pub struct Hello;

impl Backend for Hello {
    fn models(&self) -> Vec<String> {
        vec!["scripted:hello".into()]
    }

    fn resolve(
        &self,
        _provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<Resolved, BackendError> {
        if model.is_some_and(|m| m != "scripted:hello") {
            return Err(BackendError(format!(
                "unknown model `{}`",
                model.unwrap_or_default()
            )));
        }
        let scenario = Scenario::parse(
            r#"{"name": "hello", "prompt": "hi", "expect": {"stop_reason": "completed", "model_calls": 1, "tool_calls": 0},
                "rules": [{"reply": {"text": "Hello there."}}]}"#,
            "test",
        )
        .unwrap();
        Ok(Resolved {
            provider: Arc::new(ScriptedProvider::new(Arc::new(scenario))),
            toolbox: Arc::new(TestToolbox::new()),
            model: "scripted:hello".into(),
            policy: PolicyPatch::default(),
            system: Some("Be kind.".into()),
            clock: None,
        })
    }
}

fn state(keys: &[&str]) -> AppState {
    let settings = ServerSettings {
        api_keys: keys.iter().map(|k| ApiKey::new(k, None, false)).collect(),
        ..ServerSettings::default()
    };
    AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Hello),
        PolicyConfig::default(),
        settings,
    )
}

pub async fn send(state: &AppState, request: Request<Body>) -> (StatusCode, String) {
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

pub fn post(uri: &str, body: Value, key: Option<&str>) -> Request<Body> {
    let mut builder = Request::post(uri).header("content-type", "application/json");
    if let Some(key) = key {
        builder = builder.header("authorization", format!("Bearer {key}"));
    }
    builder.body(Body::from(body.to_string())).unwrap()
}

#[tokio::test]
async fn health_needs_no_key_everything_else_does() {
    let state = state(&["sk-1"]);
    let (status, body) = send(
        &state,
        Request::get("/healthz").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, r#"{"status":"ok"}"#)
    );
    let (status, body) = send(
        &state,
        Request::get("/v1/conversations")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["type"], "authentication_error");
    let (status, _) = send(
        &state,
        post("/v1/chat", json!({"message": "hi"}), Some("sk-1")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn unknown_routes_and_models_are_clear_errors() {
    let state = state(&[]);
    let (status, body) = send(
        &state,
        Request::get("/v2/nothing").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("no such endpoint"));
    let (status, body) = send(
        &state,
        post("/v1/chat", json!({"message": "hi", "model": "gpt-9"}), None),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("unknown model `gpt-9`"), "{body}");
    let (status, body) = send(
        &state,
        post(
            "/v1/chat/completions",
            json!({"model": "scripted:hello", "messages": [{"role": "robot", "content": "x"}]}),
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("unknown role `robot`"), "{body}");
    let (status, body) = send(
        &state,
        Request::get("/v1/models").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["data"][0]["id"],
        "scripted:hello"
    );
}

#[tokio::test]
async fn a_chat_turn_is_streamed_and_stored_with_its_system_prompt() {
    let state = state(&[]);
    let (status, body) = send(&state, post("/v1/chat", json!({"message": "hi"}), None)).await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        names,
        ["conversation", "text_delta", "iteration_stats", "done"]
    );
    let (_, list) = send(
        &state,
        Request::get("/v1/conversations")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    let id = serde_json::from_str::<Value>(&list).unwrap()["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    state.wait_for_turns().await;
    let (_, detail) = send(
        &state,
        Request::get(format!("/v1/conversations/{id}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    let detail: Value = serde_json::from_str(&detail).unwrap();
    assert_eq!(
        detail["messages"],
        json!([
            {"role": "system", "content": "Be kind."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello there."}
        ])
    );
    assert_eq!(detail["turns"][0]["stop_reason"], "completed");
}
