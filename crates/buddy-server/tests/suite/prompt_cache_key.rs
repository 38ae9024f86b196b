//! A client's `prompt_cache_key` reaches the model server on both OpenAI facades (Chat
//! Completions and Responses), for every call of the turn; without one, buddy sends its
//! own key for the conversation.

use std::sync::Arc;

use axum::http::StatusCode;
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_providers::{OpenAiCompat, OpenAiOptions, OpenAiProvider};
use buddy_server::{AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::SqliteStore;
use buddy_testkit::{MockResponse, MockServer, TestToolbox, openai_sse};
use serde_json::{Value, json};

use super::{post, send};

/// An OpenAI-compatible server that takes `prompt_cache_key`.
struct Keyed(String);

impl Backend for Keyed {
    fn models(&self) -> Vec<String> {
        vec!["gpt-test".into()]
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        let provider = OpenAiProvider::new(OpenAiOptions {
            base_url: self.0.clone(),
            compat: OpenAiCompat {
                prompt_cache_key: Some(true),
                ..OpenAiCompat::default()
            },
            ..OpenAiOptions::default()
        })
        .map_err(|e| BackendError(e.to_string()))?;
        Ok(Resolved {
            provider: Arc::new(provider),
            toolbox: Arc::new(TestToolbox::new()),
            model: "gpt-test".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

async fn keys_sent(uri: &str, body: Value) -> Vec<Value> {
    let upstream = MockServer::always(MockResponse::sse(openai_sse("Hello.", &[]))).await;
    let state = AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Keyed(upstream.url())),
        PolicyConfig::default(),
        ServerSettings::default(),
    );
    let (status, text) = send(&state, post(uri, body, None)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    upstream
        .requests()
        .iter()
        .map(|r| r.json()["prompt_cache_key"].clone())
        .collect()
}

#[tokio::test]
async fn chat_completions_pass_the_clients_key_on() {
    let sent = keys_sent(
        "/v1/chat/completions",
        json!({"model": "gpt-test", "prompt_cache_key": "session-42",
               "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(sent, vec![json!("session-42")]);
    // No key from the client: buddy's own for the conversation.
    let sent = keys_sent(
        "/v1/chat/completions",
        json!({"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(
        sent,
        vec![json!(buddy_engine::conversation_cache_key(&[], Some("hi")))]
    );
}

#[tokio::test]
async fn responses_pass_the_clients_key_on() {
    let sent = keys_sent(
        "/v1/responses",
        json!({"model": "gpt-test", "prompt_cache_key": "session-7", "input": "hi"}),
    )
    .await;
    assert_eq!(sent, vec![json!("session-7")]);
}
