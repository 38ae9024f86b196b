//! Stored responses read back as they were made (issue 58, item 6): a continuation and a
//! branch keep their `previous_response_id`, a background response says so while it runs
//! and after, a cancelled one's replay ends with `response.cancelled` and the text its deltas
//! said is in its `output`, and continuing a deleted response names the response, never
//! an internal turn id.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Request, StatusCode};
use buddy_core::{
    BoxFuture, CompletionRequest, Message, Provider, ProviderError, Token, TokenStream,
};
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_server::{ApiKey, AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::SqliteStore;
use buddy_testkit::{ReplyProvider, TestToolbox, reply_tokens};
use futures::StreamExt;
use serde_json::{Value, json};

use super::{post, send};

const KEY: &str = "sk-exact-EEEEEEEEEEEE";

/// Says "Partly there" and then never goes on: its turn runs until it is cancelled.
struct Halfway;

impl Provider for Halfway {
    fn name(&self) -> &str {
        "halfway"
    }

    fn stream<'a>(
        &'a self,
        _: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        Box::pin(async {
            let said = futures::stream::iter([Ok(Token::Text {
                text: "Partly there".into(),
            })]);
            Ok(said.chain(futures::stream::pending()).boxed())
        })
    }
}

/// Says nothing, ever: its turn runs until it is cancelled, before any text.
struct Silent;

impl Provider for Silent {
    fn name(&self) -> &str {
        "silent"
    }

    fn stream<'a>(
        &'a self,
        _: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        Box::pin(async { Ok(futures::stream::pending().boxed()) })
    }
}

/// The pieces `pieces` streams before it stops without ending.
const PIECES: [&str; 4] = ["Partly ", "th\u{e9}re ", "\u{1f30d}\n", "  and more"];

/// Streams [`PIECES`] (one delta each), then never goes on.
struct Pieces;

impl Provider for Pieces {
    fn name(&self) -> &str {
        "pieces"
    }

    fn stream<'a>(
        &'a self,
        _: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        Box::pin(async {
            let said = futures::stream::iter(PIECES.map(|text| {
                Ok(Token::Text {
                    text: text.to_owned(),
                })
            }));
            Ok(said.chain(futures::stream::pending()).boxed())
        })
    }
}

/// `echo` answers with the user's messages; `halfway`, `pieces` and `silent` never end
/// on their own.
struct Models;

impl Backend for Models {
    fn models(&self) -> Vec<String> {
        ["echo", "halfway", "pieces", "silent"]
            .map(String::from)
            .to_vec()
    }

    fn resolve(&self, _: Option<&str>, model: Option<&str>) -> Result<Resolved, BackendError> {
        let model = model.unwrap_or("echo").to_owned();
        let provider: Arc<dyn Provider> = match model.as_str() {
            "halfway" => Arc::new(Halfway),
            "pieces" => Arc::new(Pieces),
            "silent" => Arc::new(Silent),
            _ => Arc::new(ReplyProvider::new(|request, _| {
                let said: Vec<&str> = request
                    .messages
                    .iter()
                    .filter_map(|m| match m {
                        Message::User { content, .. } => Some(content.as_str()),
                        _ => None,
                    })
                    .collect();
                Ok(reply_tokens(&said.join(" "), vec![]))
            })),
        };
        Ok(Resolved {
            provider,
            toolbox: Arc::new(TestToolbox::new()),
            model,
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

fn state() -> AppState {
    AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Models),
        PolicyConfig::default(),
        ServerSettings {
            api_keys: vec![ApiKey::new(KEY, None, false)],
            max_concurrent_turns_per_key: 16,
            ..ServerSettings::default()
        },
    )
}

async fn create(state: &AppState, body: Value) -> (StatusCode, Value) {
    let (status, text) = send(state, post("/v1/responses", body, Some(KEY))).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn get(state: &AppState, uri: &str) -> (StatusCode, String) {
    let request = Request::get(uri)
        .header("authorization", format!("Bearer {KEY}"))
        .body(axum::body::Body::empty())
        .unwrap();
    send(state, request).await
}

async fn read(state: &AppState, id: &str) -> Value {
    let (status, text) = get(state, &format!("/v1/responses/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// Reads response `id` until it has ended.
async fn ended(state: &AppState, id: &str) -> Value {
    for _ in 0..400 {
        let read = read(state, id).await;
        if !matches!(read["status"].as_str(), Some("queued" | "in_progress")) {
            return read;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("response {id} never ended");
}

/// The `data:` objects of a stream's body, in order (`[DONE]` left out).
fn events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuation_and_a_branch_read_back_the_response_they_continue() {
    let state = state();
    let (_, first) = create(&state, json!({"model": "echo", "input": "a"})).await;
    let r1 = first["id"].as_str().unwrap().to_owned();
    assert_eq!(read(&state, &r1).await["previous_response_id"], Value::Null);
    let (_, second) = create(
        &state,
        json!({"model": "echo", "input": "b", "previous_response_id": r1}),
    )
    .await;
    let r2 = second["id"].as_str().unwrap().to_owned();
    // r1 is no longer the last response of its conversation: this is a branch.
    let (status, branch) = create(
        &state,
        json!({"model": "echo", "input": "c", "previous_response_id": r1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{branch}");
    let r3 = branch["id"].as_str().unwrap().to_owned();
    assert_eq!(branch["output"][0]["content"][0]["text"], "a c");
    for (id, previous) in [(&r2, &r1), (&r3, &r1)] {
        let read = read(&state, id).await;
        assert_eq!(read["previous_response_id"], json!(previous), "{read}");
        assert_eq!(read["background"], false);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_response_says_so_while_it_runs_and_after() {
    let state = state();
    let (status, created) = create(
        &state,
        json!({"model": "halfway", "input": "go", "background": true}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    assert_eq!(created["background"], true);
    let id = created["id"].as_str().unwrap().to_owned();
    let running = read(&state, &id).await;
    assert_eq!(
        (&running["status"], &running["background"]),
        (&json!("in_progress"), &json!(true)),
        "{running}"
    );
    let (status, _) = send(
        &state,
        post(&format!("/v1/responses/{id}/cancel"), json!({}), Some(KEY)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let after = ended(&state, &id).await;
    assert_eq!(after["background"], true, "{after}");
    // One that is not in the background says `false`.
    let (_, plain) = create(&state, json!({"model": "echo", "input": "x"})).await;
    let plain = read(&state, plain["id"].as_str().unwrap()).await;
    assert_eq!(plain["background"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_responses_replay_ends_cancelled_and_agrees_with_its_output() {
    let state = state();
    let (_, created) = create(
        &state,
        json!({"model": "halfway", "input": "go", "background": true}),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    // Cancelled once the model has begun to answer.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, text) = send(
        &state,
        post(&format!("/v1/responses/{id}/cancel"), json!({}), Some(KEY)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let whole = ended(&state, &id).await;
    assert_eq!(whole["status"], "cancelled", "{whole}");
    let (status, body) = get(&state, &format!("/v1/responses/{id}?stream=true")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let events = events(&body);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.cancelled", "{body}");
    assert_eq!(last["response"]["status"], "cancelled");
    assert!(
        !events.iter().any(|e| e["type"] == "response.completed"),
        "{body}"
    );
    // What the deltas said is what the output that ends the replay holds.
    let said: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    let text_of = |response: &Value| -> String {
        response["output"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|item| item["content"].as_array().cloned().unwrap_or_default())
            .filter_map(|part| part["text"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(said, "Partly there", "{body}");
    assert_eq!(said, text_of(&last["response"]), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuing_a_deleted_response_names_the_response_not_a_turn() {
    let state = state();
    let (_, first) = create(&state, json!({"model": "echo", "input": "a"})).await;
    let r1 = first["id"].as_str().unwrap().to_owned();
    let (_, second) = create(
        &state,
        json!({"model": "echo", "input": "b", "previous_response_id": r1}),
    )
    .await;
    let r2 = second["id"].as_str().unwrap().to_owned();
    // r1 is hidden (r2 builds on it), r2 is removed: each is gone to a client.
    for gone in [&r1, &r2] {
        let request = Request::delete(format!("/v1/responses/{gone}"))
            .header("authorization", format!("Bearer {KEY}"))
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(send(&state, request).await.0, StatusCode::OK);
    }
    for gone in [&r1, &r2] {
        let (status, error) = create(
            &state,
            json!({"model": "echo", "input": "c", "previous_response_id": gone}),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("response `{gone}` does not exist")),
            "{message}"
        );
        assert!(!message.contains("turn_"), "{message}");
    }
}

/// Starts a background response of `model`, waits until its stream has said `deltas`
/// text deltas, cancels it and waits for its end; its replayed events and the response
/// read back, each checked against the cancel's answer.
async fn cancelled_after(state: &AppState, model: &str, deltas: usize) -> (Vec<Value>, Value) {
    // The created response's own stream, read until the deltas are there (it does not
    // end before the cancel).
    let request = post(
        "/v1/responses",
        json!({"model": model, "input": "go", "background": true, "stream": true}),
        Some(KEY),
    );
    let response = tower::ServiceExt::oneshot(buddy_server::app(state.clone()), request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body().into_data_stream();
    let mut seen = String::new();
    while !seen.contains("response.created")
        || seen.matches("response.output_text.delta").count() < deltas * 2
    {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .expect("the events come")
            .expect("the stream goes on")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let created = events(&seen)
        .into_iter()
        .find(|e| e["type"] == "response.created")
        .unwrap();
    let id = created["response"]["id"].as_str().unwrap().to_owned();
    let uri = format!("/v1/responses/{id}?stream=true");
    if deltas == 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, text) = send(
        state,
        post(&format!("/v1/responses/{id}/cancel"), json!({}), Some(KEY)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let answered: Value = serde_json::from_str(&text).unwrap();
    let whole = ended(state, &id).await;
    assert_eq!(answered["status"], "cancelled", "{answered}");
    assert_eq!(
        answered["output"], whole["output"],
        "the cancel answers what is kept"
    );
    let (status, replay) = get(state, &uri).await;
    assert_eq!(status, StatusCode::OK, "{replay}");
    (events(&replay), whole)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_cancelled_mid_text_keeps_the_text_streamed_so_far() {
    let state = state();
    let (events, whole) = cancelled_after(&state, "pieces", PIECES.len()).await;
    let said: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert_eq!(said, PIECES.concat());
    // Read back, it holds one message: the text the deltas said, byte for byte,
    // `incomplete` as OpenAI marks the output a cancel cut short.
    assert_eq!(whole["status"], "cancelled", "{whole}");
    let output = whole["output"].as_array().unwrap();
    assert_eq!(output.len(), 1, "{whole}");
    let message = &output[0];
    assert_eq!(
        (&message["type"], &message["role"], &message["status"]),
        (&json!("message"), &json!("assistant"), &json!("incomplete")),
        "{message}"
    );
    assert_eq!(message["content"][0]["type"], "output_text");
    assert_eq!(message["content"][0]["text"], said.as_str());
    // The replay's last event carries the same response output, item for item.
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.cancelled");
    assert_eq!(last["response"]["output"], whole["output"]);
    let done = events
        .iter()
        .find(|e| e["type"] == "response.output_item.done")
        .expect("the message is closed in the stream");
    assert_eq!(&done["item"], message);
    // The partial message is the response's: a continuation builds on it.
    let (status, next) = create(
        &state,
        json!({"model": "echo", "input": "on", "previous_response_id": whole["id"]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{next}");
    assert_eq!(next["output"][0]["content"][0]["text"], "go on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_cancelled_before_any_text_has_no_output() {
    let state = state();
    let (events, whole) = cancelled_after(&state, "silent", 0).await;
    assert_eq!(whole["status"], "cancelled", "{whole}");
    assert_eq!(whole["output"], json!([]), "{whole}");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.cancelled");
    assert_eq!(last["response"]["output"], json!([]));
    assert!(
        !events
            .iter()
            .any(|e| e["type"] == "response.output_text.delta"),
        "{events:?}"
    );
}
