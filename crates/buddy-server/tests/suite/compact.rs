//! `POST /v1/responses/compact`: the user messages kept, the rest one `compaction` item
//! that a later request sends back as input and the model reads as a summary.

use std::sync::Arc;

use axum::http::StatusCode;
use buddy_core::Message;
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_server::{AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::SqliteStore;
use buddy_testkit::{ReplyProvider, TestToolbox, reply_tokens};
use serde_json::{Value, json};

use super::{post, send};

/// A model that summarises when asked to, and otherwise says which system messages it
/// was given.
struct Summariser;

impl Backend for Summariser {
    fn models(&self) -> Vec<String> {
        vec!["summariser".into()]
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        let provider = ReplyProvider::new(|request, _| {
            let systems: Vec<&str> = request
                .messages
                .iter()
                .filter_map(|m| match m {
                    Message::System { content } => Some(content.as_str()),
                    _ => None,
                })
                .collect();
            let asked_to_compact = systems.iter().any(|s| s.starts_with("You compact"));
            Ok(if asked_to_compact {
                let transcript = match request.messages.last() {
                    Some(Message::User { content, .. }) => content.clone(),
                    _ => String::new(),
                };
                assert!(
                    transcript.contains("User: We launch on Tuesday."),
                    "{transcript}"
                );
                assert!(transcript.contains("called lookup"), "{transcript}");
                reply_tokens("Launch on Tuesday; tell support first.", vec![])
            } else {
                reply_tokens(&format!("I was told: {}", systems.join(" | ")), vec![])
            })
        });
        Ok(Resolved {
            provider: Arc::new(provider),
            toolbox: Arc::new(TestToolbox::new()),
            model: "summariser".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

fn state() -> AppState {
    AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Summariser),
        PolicyConfig::default(),
        ServerSettings::default(),
    )
}

async fn call(state: &AppState, uri: &str, body: Value) -> (StatusCode, Value) {
    let (status, text) = send(state, post(uri, body, None)).await;
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn a_compacted_conversation_carries_on_from_its_summary() {
    let state = state();
    let (status, compacted) = call(
        &state,
        "/v1/responses/compact",
        json!({"model": "summariser", "prompt_cache_key": "k", "input": [
            {"role": "user", "content": "We launch on Tuesday."},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{\"q\":\"support\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": "support: 3 people"},
            {"role": "assistant", "content": "Noted: Tuesday, and support is told first."},
            {"role": "user", "content": "Tell support first."},
        ]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{compacted}");
    assert_eq!(compacted["object"], "response.compaction");
    let output = compacted["output"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = output
        .iter()
        .map(|i| {
            (
                i["type"].as_str().unwrap(),
                i["role"].as_str().unwrap_or(""),
            )
        })
        .collect();
    // The user's own words stay as they were; the rest is the compaction item.
    assert_eq!(
        kinds,
        [("message", "user"), ("message", "user"), ("compaction", "")]
    );
    assert_eq!(output[0]["content"][0]["text"], "We launch on Tuesday.");
    assert_eq!(compacted["usage"]["input_tokens"], 10);

    // The compacted output, sent back with a new question: the model reads the summary.
    let mut input = output.clone();
    input.push(json!({"role": "user", "content": "What did we agree?"}));
    let (status, response) = call(
        &state,
        "/v1/responses",
        json!({"model": "summariser", "input": input}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{response}");
    let text = response["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        text.contains("compacted") && text.contains("Launch on Tuesday; tell support first."),
        "{text}"
    );
}

#[tokio::test]
async fn bad_compaction_requests_are_named() {
    let state = state();
    let (status, error) = call(
        &state,
        "/v1/responses/compact",
        json!({"input": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`model` is required")
    );
    let (status, error) = call(
        &state,
        "/v1/responses/compact",
        json!({"model": "summariser", "input": []}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nothing to compact")
    );
    // A forged or foreign compaction item is refused by name, not read.
    let (status, error) = call(
        &state,
        "/v1/responses",
        json!({"model": "summariser", "input": [
            {"type": "compaction", "encrypted_content": "gAAAAABo-openai-blob"},
            {"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("input[0]: this `compaction` item cannot be read"),
        "{error}"
    );
    let (status, _) = call(
        &state,
        "/v1/responses/compact",
        json!({"model": "summariser", "previous_response_id": "resp_nope"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
