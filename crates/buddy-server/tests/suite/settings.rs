//! A conversation's own settings (system prompt, policy) stay with it: every later turn,
//! a resumed one and a fork run with them (seen at a recording model server), the stored
//! history never holds them, and they can lower the operator's limits but not raise them.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_providers::{OpenAiOptions, OpenAiProvider};
use buddy_server::{ApiKey, AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::SqliteStore;
use buddy_testkit::{MockResponse, MockServer, TestTool, TestToolbox, openai_sse};
use serde_json::{Value, json};

use super::send;
use super::sharing::turn;

const ALICE: &str = "sk-alice";
const BOB: &str = "sk-bob";

/// `gpt-test` on one loopback OpenAI-compatible server, with the operator's system prompt
/// and one tool.
struct Recorded {
    url: String,
}

impl Backend for Recorded {
    fn models(&self) -> Vec<String> {
        vec!["gpt-test".into()]
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        let provider = OpenAiProvider::new(OpenAiOptions {
            base_url: self.url.clone(),
            ..OpenAiOptions::default()
        })
        .map_err(|e| BackendError(e.to_string()))?;
        Ok(Resolved {
            provider: Arc::new(provider),
            toolbox: Arc::new(TestToolbox::new().with("lookup", TestTool::echo())),
            model: "gpt-test".into(),
            policy: PolicyPatch::default(),
            system: Some("Operator rules.".into()),
            clock: None,
        })
    }
}

fn state(model: &MockServer) -> AppState {
    AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Recorded { url: model.url() }),
        PolicyConfig::default(),
        ServerSettings {
            api_keys: [ALICE, BOB]
                .iter()
                .map(|k| ApiKey::new(k, None, false))
                .collect(),
            ..ServerSettings::default()
        },
    )
}

/// The system messages of the model server's latest request, in order.
fn systems_sent(model: &MockServer) -> Vec<String> {
    let body = model
        .requests()
        .last()
        .expect("the model was called")
        .json();
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn request(method: &str, uri: &str, body: Option<Value>, key: &str) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {key}"))
        .body(body.map_or(Body::empty(), |b| Body::from(b.to_string())))
        .unwrap()
}

async fn call(
    state: &AppState,
    method: &str,
    uri: &str,
    body: Option<Value>,
    key: &str,
) -> (StatusCode, Value) {
    let (status, text) = send(state, request(method, uri, body, key)).await;
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn a_conversations_system_prompt_reaches_every_turn_and_fork_and_is_never_stored() {
    let model = MockServer::always(MockResponse::sse(openai_sse("D'accord.", &[]))).await;
    let state = state(&model);
    let (id, (end, _)) = turn(
        &state,
        json!({"message": "hi", "settings": {"system": "Answer in French."}}),
        ALICE,
    )
    .await;
    assert_eq!(end, "done");
    assert_eq!(
        systems_sent(&model),
        ["Operator rules.", "Answer in French."],
        "the conversation's prompt comes after the operator's"
    );

    // Kept: the next turn names only the conversation and still runs with it.
    let (_, (end, _)) = turn(
        &state,
        json!({"message": "again", "conversation_id": id}),
        ALICE,
    )
    .await;
    assert_eq!(end, "done");
    assert_eq!(
        systems_sent(&model),
        ["Operator rules.", "Answer in French."]
    );
    let (status, detail) = call(
        &state,
        "GET",
        &format!("/v1/conversations/{id}"),
        None,
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(detail["settings"], json!({"system": "Answer in French."}));
    let stored = detail["messages"].to_string();
    assert!(!stored.contains("Answer in French."), "{stored}");

    // Changed: the next turn runs with the new prompt, the old one is gone.
    let (status, changed) = call(
        &state,
        "PATCH",
        &format!("/v1/conversations/{id}"),
        Some(json!({"settings": {"system": "Answer in German.", "policy": {"max_tool_calls": 3}}})),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["settings"]["system"], "Answer in German.");
    turn(
        &state,
        json!({"message": "and now?", "conversation_id": id}),
        ALICE,
    )
    .await;
    assert_eq!(
        systems_sent(&model),
        ["Operator rules.", "Answer in German."]
    );

    // A fork (regenerate, edit and resend) carries them.
    let (status, fork) = call(
        &state,
        "POST",
        &format!("/v1/conversations/{id}/fork"),
        Some(json!({"before": 2})),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{fork}");
    let fork_id = fork["id"].as_str().unwrap();
    let (_, copy) = call(
        &state,
        "GET",
        &format!("/v1/conversations/{fork_id}"),
        None,
        ALICE,
    )
    .await;
    assert_eq!(copy["settings"], changed["settings"]);
    turn(
        &state,
        json!({"message": "in the fork", "conversation_id": fork_id}),
        ALICE,
    )
    .await;
    assert_eq!(
        systems_sent(&model),
        ["Operator rules.", "Answer in German."]
    );

    // Cleared: `{}` removes them.
    call(
        &state,
        "PATCH",
        &format!("/v1/conversations/{id}"),
        Some(json!({"settings": {}})),
        ALICE,
    )
    .await;
    turn(
        &state,
        json!({"message": "plain", "conversation_id": id}),
        ALICE,
    )
    .await;
    assert_eq!(systems_sent(&model), ["Operator rules."]);
}

#[tokio::test]
async fn a_conversations_policy_limits_its_turns_but_cannot_raise_the_operators() {
    // A model that always asks for the tool again: only a limit ends its turns.
    let model = MockServer::always(MockResponse::sse(openai_sse(
        "",
        &[("call_1", "lookup", "{\"q\": \"more\"}")],
    )))
    .await;
    let state = state(&model);
    let (id, (_, done)) = turn(
        &state,
        json!({"message": "dig", "settings": {"policy": {"max_model_calls": 3}}}),
        ALICE,
    )
    .await;
    assert_eq!(done["reason"], "max_model_calls", "{done}");
    assert_eq!(model.requests().len(), 3);

    // The next turn keeps the limit; a request's own policy still lowers it further.
    let (_, (_, done)) = turn(
        &state,
        json!({"message": "dig on", "conversation_id": id}),
        ALICE,
    )
    .await;
    assert_eq!(done["reason"], "max_model_calls", "{done}");
    assert_eq!(model.requests().len(), 6);
    let (_, (_, done)) = turn(
        &state,
        json!({"message": "once", "conversation_id": id, "policy": {"max_model_calls": 2}}),
        ALICE,
    )
    .await;
    assert_eq!(done["reason"], "max_model_calls", "{done}");
    assert_eq!(model.requests().len(), 8);

    // Above the operator's limit (25 model calls by default): refused when saved, by name.
    let uri = format!("/v1/conversations/{id}");
    let (status, error) = call(
        &state,
        "PATCH",
        &uri,
        Some(json!({"settings": {"policy": {"max_model_calls": 500}}})),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert!(error.to_string().contains("max_model_calls"), "{error}");
    let (_, detail) = call(&state, "GET", &uri, None, ALICE).await;
    assert_eq!(detail["settings"]["policy"], json!({"max_model_calls": 3}));

    // And on a new conversation, before anything is created.
    let before = model.requests().len();
    let (status, text) = send(
        &state,
        request(
            "POST",
            "/v1/chat",
            Some(json!({"message": "hi", "settings": {"policy": {"max_model_calls": 500}}})),
            BOB,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    // A request policy that lowers the same limit for this turn does not let raised
    // settings through: they are checked on their own, as they would be kept.
    let (status, text) = send(
        &state,
        request(
            "POST",
            "/v1/chat",
            Some(json!({"message": "hi", "policy": {"max_model_calls": 2},
                        "settings": {"policy": {"max_model_calls": 500}}})),
            BOB,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("max_model_calls"), "{text}");
    // Nor on a conversation that exists.
    let (status, text) = send(
        &state,
        request(
            "POST",
            "/v1/chat",
            Some(
                json!({"message": "more", "conversation_id": id, "policy": {"max_model_calls": 2},
                        "settings": {"policy": {"max_model_calls": 500}}}),
            ),
            ALICE,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    let (_, detail) = call(&state, "GET", &uri, None, ALICE).await;
    assert_eq!(detail["settings"]["policy"], json!({"max_model_calls": 3}));
    let (_, list) = call(&state, "GET", "/v1/conversations", None, BOB).await;
    assert_eq!(list["data"], json!([]));
    assert_eq!(model.requests().len(), before);
}

#[tokio::test]
async fn bad_settings_and_other_keys_conversations_are_refused() {
    let model = MockServer::always(MockResponse::sse(openai_sse("ok", &[]))).await;
    let state = state(&model);
    let (id, _) = turn(&state, json!({"message": "hi"}), ALICE).await;
    let uri = format!("/v1/conversations/{id}");
    for (body, named) in [
        (
            json!({"settings": {"policy": {"max_tool_calls": "many"}}}),
            "max_tool_calls",
        ),
        (
            json!({"settings": {"policy": {"not_a_field": 1}}}),
            "not_a_field",
        ),
        (json!({"settings": {"sytem": "typo"}}), "sytem"),
        (json!({"settings": "French"}), "settings"),
        (json!({}), "settings"),
    ] {
        let (status, error) = call(&state, "PATCH", &uri, Some(body.clone()), ALICE).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {error}");
        assert!(error.to_string().contains(named), "{body}: {error}");
    }
    // Another key's conversation reads as one that does not exist.
    let (status, _) = call(
        &state,
        "PATCH",
        &uri,
        Some(json!({"settings": {"system": "mine now"}})),
        BOB,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, detail) = call(&state, "GET", &uri, None, ALICE).await;
    assert_eq!(detail["settings"], json!({}));
    // Title and settings in one request.
    let (status, both) = call(
        &state,
        "PATCH",
        &uri,
        Some(json!({"title": "Plans", "settings": {"system": "Be brief."}})),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{both}");
    let (_, detail) = call(&state, "GET", &uri, None, ALICE).await;
    assert_eq!(
        (detail["title"].clone(), detail["settings"].clone()),
        (json!("Plans"), json!({"system": "Be brief."}))
    );
}
