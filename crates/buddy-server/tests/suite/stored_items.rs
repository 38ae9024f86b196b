//! What a key stores cannot take it or its neighbours down (issue 46, item 11): the
//! Conversations API refuses a tool result without its call and writes past the key's
//! storage quota; a damaged row is kept to its conversation; `after` past every event
//! returns nothing rather than wrapping to the start.

use std::sync::Arc;

use axum::http::StatusCode;
use buddy_engine::PolicyConfig;
use buddy_server::{ApiKey, AppState, ServerSettings};
use buddy_store::{SqliteStore, Store};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::sharing::{ALICE, BOB, TestBackend, events, get};
use super::{post, send};

fn server(store: Arc<dyn Store>, tweak: impl FnOnce(&mut ServerSettings)) -> AppState {
    let mut settings = ServerSettings {
        api_keys: vec![
            ApiKey::new(ALICE, None, false),
            ApiKey::new(BOB, Some("bob"), false),
        ],
        ..ServerSettings::default()
    };
    tweak(&mut settings);
    let backend = Arc::new(TestBackend {
        gate: Arc::new(Semaphore::new(1 << 20)),
    });
    AppState::new(store, backend, PolicyConfig::default(), settings)
}

fn in_memory() -> Arc<dyn Store> {
    Arc::new(SqliteStore::in_memory().unwrap())
}

fn call(id: &str) -> Value {
    json!({"type": "function_call", "call_id": id, "name": "lookup", "arguments": "{}"})
}

fn output(id: &str) -> Value {
    json!({"type": "function_call_output", "call_id": id, "output": "42"})
}

#[tokio::test]
async fn a_tool_result_without_its_call_is_refused_at_the_api() {
    let state = server(in_memory(), |_| {});
    let user = json!({"role": "user", "content": "look it up"});
    let (status, text) = send(
        &state,
        post(
            "/v1/conversations",
            json!({"items": [user, output("call_x")]}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(
        text.contains("call `call_x`, which no `function_call` before it made"),
        "{text}"
    );
    // Nothing was created.
    let (_, list) = send(&state, get("/v1/conversations", ALICE)).await;
    assert_eq!(
        serde_json::from_str::<Value>(&list).unwrap()["data"],
        json!([])
    );

    let (status, text) = send(
        &state,
        post(
            "/v1/conversations",
            json!({"items": [user, call("call_1"), output("call_1")]}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let id = serde_json::from_str::<Value>(&text).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let items = format!("/v1/conversations/{id}/items");
    // An output of a call the conversation never made, alone or after another call.
    for added in [
        json!([output("call_2")]),
        json!([call("call_9"), output("call_2")]),
    ] {
        let (status, text) = send(&state, post(&items, json!({"items": added}), Some(ALICE))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        assert!(text.contains("call `call_2`"), "{text}");
    }
    // An output answered already is refused too; a call and its output added together
    // are kept, and so is the output of a call the conversation ends with.
    let (status, text) = send(
        &state,
        post(&items, json!({"items": [output("call_1")]}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    let (status, text) = send(
        &state,
        post(
            &items,
            json!({"items": [call("call_2"), output("call_2"), call("call_3")]}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let (status, text) = send(
        &state,
        post(&items, json!({"items": [output("call_3")]}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    // And the conversation still takes turns.
    let (status, text) = send(
        &state,
        post(
            "/v1/responses",
            json!({"model": "model-a", "conversation": id, "input": "again"}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
}

#[tokio::test]
async fn a_key_past_its_storage_quota_is_refused_and_others_are_not() {
    let state = server(in_memory(), |s| s.max_stored_bytes_per_key = 20_000);
    let big = |n: usize| json!({"items": [{"role": "user", "content": "x".repeat(n)}]});
    let (status, text) = send(&state, post("/v1/conversations", big(12_000), Some(ALICE))).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let id = serde_json::from_str::<Value>(&text).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // 12 KB stored, 12 KB more would pass 20 KB: refused, whichever way it is written.
    for uri in [
        "/v1/conversations".to_owned(),
        format!("/v1/conversations/{id}/items"),
    ] {
        let response = tower::ServiceExt::oneshot(
            buddy_server::app(state.clone()),
            post(&uri, big(12_000), Some(ALICE)),
        )
        .await
        .unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS, "{uri}");
        assert_eq!(
            response.headers()["x-should-retry"],
            "false",
            "time alone does not lift it"
        );
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let error: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(error["error"]["code"], "insufficient_quota", "{error}");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("max_stored_bytes_per_key"),
            "{error}"
        );
    }
    // Small writes and turns still fit; the stored bytes never pass the quota.
    let (status, text) = send(
        &state,
        post("/v1/chat", json!({"message": "hi"}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let (status, text) = send(
        &state,
        post(
            "/v1/chat",
            json!({"message": "x".repeat(9_000)}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");
    // Another key has a quota of its own.
    let (status, text) = send(&state, post("/v1/conversations", big(12_000), Some(BOB))).await;
    assert_eq!(status, StatusCode::OK, "{text}");
}

#[tokio::test]
async fn a_damaged_row_is_kept_to_its_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("buddy.db");
    let state = server(Arc::new(SqliteStore::open(&path).unwrap()), |_| {});
    let mut ids = Vec::new();
    for text in ["the good one", "the bad one"] {
        let (status, body) = send(
            &state,
            post(
                "/v1/conversations",
                json!({"items": [{"role": "user", "content": text}]}),
                Some(ALICE),
            ),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        ids.push(
            serde_json::from_str::<Value>(&body).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    // Invalid UTF-8, as a damaged disk or a hand edit leaves it.
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute(
        "UPDATE messages SET body = X'C328FF' WHERE conversation_id = ?1",
        [&ids[1]],
    )
    .unwrap();
    let (status, list) = send(&state, get("/v1/conversations", ALICE)).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let list: Value = serde_json::from_str(&list).unwrap();
    let titles: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["title"].as_str())
        .collect();
    assert!(
        titles.contains(&"the good one") && titles.contains(&buddy_store::UNREADABLE_TITLE),
        "{titles:?}"
    );
    let (status, found) = send(&state, get("/v1/conversations?q=good", ALICE)).await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert_eq!(
        serde_json::from_str::<Value>(&found).unwrap()["data"][0]["id"],
        ids[0].as_str()
    );
    // The damaged one itself is an error that does not ask to be retried.
    let response = tower::ServiceExt::oneshot(
        buddy_server::app(state.clone()),
        get(&format!("/v1/conversations/{}", ids[1]), ALICE),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(response.headers()["x-should-retry"], "false");
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&body).contains("retry"),
        "{body:?}"
    );
}

#[tokio::test]
async fn after_past_every_event_returns_nothing_and_never_wraps() {
    let state = server(in_memory(), |_| {});
    let (status, text) = send(
        &state,
        post("/v1/chat", json!({"message": "look it up"}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let turn = events(&text)[0].1["turn_id"].as_str().unwrap().to_owned();
    for after in [
        "18446744073709551615",
        "18446744073709551614",
        "9223372036854775808",
    ] {
        let (status, body) = send(
            &state,
            get(&format!("/v1/turns/{turn}/events?after={after}"), ALICE),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(events(&body), vec![], "after={after}: {body}");
    }
    // Last-Event-ID the same.
    let mut request = get(&format!("/v1/turns/{turn}/events"), ALICE);
    request
        .headers_mut()
        .insert("last-event-id", "18446744073709551615".parse().unwrap());
    let (status, body) = send(&state, request).await;
    assert_eq!((status, events(&body)), (StatusCode::OK, vec![]), "{body}");
    // A response's stream the same.
    let (status, text) = send(
        &state,
        post(
            "/v1/responses",
            json!({"model": "model-a", "input": "hi", "stream": true}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let id = events(&text)[0].1["response"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let uri = format!("/v1/responses/{id}?stream=true&starting_after=18446744073709551615");
    let (status, body) = send(&state, get(&uri, ALICE)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(!body.contains("response.created"), "{body}");
}
