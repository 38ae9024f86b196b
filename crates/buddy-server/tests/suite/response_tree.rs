//! Responses form a tree, as OpenAI's do: a response's context is its own chain of
//! ancestors, branches from one response are independent (and may run at once), and
//! deleting a response deletes that response only — on SQLite, and on PostgreSQL across
//! two instances.

use std::sync::Arc;

use axum::http::StatusCode;
use buddy_core::Message;
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_server::{ApiKey, AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::{PgStore, SqliteStore, Store};
use buddy_testkit::{ReplyProvider, TestToolbox, reply_tokens};
use serde_json::{Value, json};

use super::{post, send};

/// This suite's own key: on a PostgreSQL shared with other suites, another suite's running
/// turns never count against its cap.
const ALICE: &str = "sk-tree-TTTTTTTTTTTT";

/// A model that answers with every user message it was sent, in order: what a
/// response's context was can be read from its answer.
struct Echo;

impl Backend for Echo {
    fn models(&self) -> Vec<String> {
        vec!["echo".into()]
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        let provider = ReplyProvider::new(|request, _| {
            let said: Vec<&str> = request
                .messages
                .iter()
                .filter_map(|m| match m {
                    Message::User { content, .. } => Some(content.as_str()),
                    _ => None,
                })
                .collect();
            Ok(reply_tokens(&said.join(" "), vec![]))
        });
        Ok(Resolved {
            provider: Arc::new(provider),
            toolbox: Arc::new(TestToolbox::new()),
            model: "echo".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

fn settings() -> ServerSettings {
    ServerSettings {
        api_keys: vec![ApiKey::new(ALICE, None, false)],
        max_concurrent_turns_per_key: 64,
        ..ServerSettings::default()
    }
}

/// `input`, after `previous` when given: the response's id and answer.
async fn respond(state: &AppState, previous: Option<&str>, input: &str) -> (String, String) {
    let mut body = json!({"model": "echo", "input": input});
    if let Some(previous) = previous {
        body["previous_response_id"] = json!(previous);
    }
    let (status, text) = send(state, post("/v1/responses", body, Some(ALICE))).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let response: Value = serde_json::from_str(&text).unwrap();
    let answer = response["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (response["id"].as_str().unwrap().to_owned(), answer)
}

async fn status_of(state: &AppState, method: &str, id: &str) -> StatusCode {
    let request = axum::http::Request::builder()
        .method(method)
        .uri(format!("/v1/responses/{id}"))
        .header("authorization", format!("Bearer {ALICE}"))
        .body(axum::body::Body::empty())
        .unwrap();
    send(state, request).await.0
}

/// `GET /v1/responses/{id}{tail}` as JSON.
async fn read(state: &AppState, id: &str, tail: &str) -> Value {
    let request = axum::http::Request::get(format!("/v1/responses/{id}{tail}"))
        .header("authorization", format!("Bearer {ALICE}"))
        .body(axum::body::Body::empty())
        .unwrap();
    let (status, text) = send(state, request).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// The tree, driven through `a` and `b` (the same instance, or two on one database).
async fn a_tree_of_responses(a: &AppState, b: &AppState) {
    let (r1, said) = respond(a, None, "a").await;
    assert_eq!(said, "a");
    let (r2, said) = respond(a, Some(&r1), "b").await;
    assert_eq!(said, "a b");
    let (r3, said) = respond(b, Some(&r2), "c").await;
    assert_eq!(said, "a b c");
    // Compacting from r1 compacts r1's chain, not what came after it.
    let (status, text) = send(
        a,
        post(
            "/v1/responses/compact",
            json!({"model": "echo", "previous_response_id": r1}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let compacted: Value = serde_json::from_str(&text).unwrap();
    let kept: Vec<&str> = compacted["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["content"][0]["text"].as_str())
        .collect();
    assert_eq!(kept, ["a"], "{compacted}");
    // From r1 again: r1's context only, not r2's and r3's.
    let (r1x, said) = respond(b, Some(&r1), "x").await;
    assert_eq!(said, "a x", "a branch from r1 holds r1's chain only");
    let (_, said) = respond(a, Some(&r1x), "y").await;
    assert_eq!(said, "a x y");
    // The branch's response is its own: its output and input, not its ancestors'.
    let (got, input) = (read(b, &r1x, "").await, read(a, &r1x, "/input_items").await);
    assert_eq!(got["output"].as_array().map(Vec::len), Some(1), "{got}");
    assert_eq!(got["output"][0]["content"][0]["text"], "a x");
    let inputs: Vec<&str> = input["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["content"][0]["text"].as_str())
        .collect();
    assert_eq!(inputs, ["x"]);
    let (_, said) = respond(a, Some(&r3), "d").await;
    assert_eq!(said, "a b c d", "the first branch goes on as it was");

    // Three at once from r1: three branches, no 409.
    let parallel = ["p", "q", "r"].map(|word| {
        let (state, r1) = (if word == "q" { b } else { a }.clone(), r1.clone());
        tokio::spawn(async move { respond(&state, Some(&r1), word).await })
    });
    for (word, branch) in ["p", "q", "r"].iter().zip(parallel) {
        let (_, said) = branch.await.unwrap();
        assert_eq!(said, format!("a {word}"));
    }

    // Deleting r2 deletes r2 only: r1 stays, r3 keeps its context.
    assert_eq!(status_of(a, "DELETE", &r2).await, StatusCode::OK);
    assert_eq!(status_of(b, "GET", &r2).await, StatusCode::NOT_FOUND);
    assert_eq!(status_of(b, "DELETE", &r2).await, StatusCode::NOT_FOUND);
    assert_eq!(status_of(a, "GET", &r1).await, StatusCode::OK);
    assert_eq!(status_of(a, "GET", &r3).await, StatusCode::OK);
    let (_, said) = respond(b, Some(&r3), "e").await;
    assert_eq!(said, "a b c e");
    let (status, _) = send(
        a,
        post(
            "/v1/responses",
            json!({"model": "echo", "input": "z", "previous_response_id": r2}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a deleted response is not continued"
    );
    // Deleting r1 leaves every response built on it as it was.
    assert_eq!(status_of(a, "DELETE", &r1).await, StatusCode::OK);
    assert_eq!(status_of(a, "GET", &r1).await, StatusCode::NOT_FOUND);
    assert_eq!(status_of(b, "GET", &r1x).await, StatusCode::OK);
    let (_, said) = respond(a, Some(&r1x), "w").await;
    assert_eq!(said, "a x w");
}

#[tokio::test]
async fn responses_form_a_tree_on_sqlite() {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::in_memory().unwrap());
    let state = AppState::new(store, Arc::new(Echo), PolicyConfig::default(), settings());
    a_tree_of_responses(&state, &state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_form_a_tree_across_two_postgres_instances() {
    let url = std::env::var("BUDDY_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!("BUDDY_TEST_POSTGRES_URL is not set: run the suite with scripts/test.sh, which starts a throw-away PostgreSQL")
    });
    let mut instances = Vec::new();
    for _ in 0..2 {
        let store = PgStore::connect(&url).await.unwrap();
        instances.push(AppState::shared(
            Arc::new(store.clone()),
            Arc::new(store),
            Arc::new(Echo),
            PolicyConfig::default(),
            settings(),
        ));
    }
    a_tree_of_responses(&instances[0], &instances[1]).await;
}
