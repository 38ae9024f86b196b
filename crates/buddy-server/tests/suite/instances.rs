//! Two server instances on one PostgreSQL behave as one server: a conversation started
//! on A continues on B, a cancel sent to B stops the turn running on A, and the
//! one-turn-per-conversation rule and the per-key cap hold across them.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use buddy_engine::PolicyConfig;
use buddy_server::{ApiKey, AppState, ServerSettings, app};
use buddy_store::PgStore;
use serde_json::json;
use tokio::sync::Semaphore;
use tower::ServiceExt;

use super::sharing::{ALICE, BOB, OPEN_GATE, TestBackend, events, get, turn};
use super::{post, send};

/// The PostgreSQL `scripts/test.sh` started.
fn postgres_url() -> String {
    std::env::var("BUDDY_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!("BUDDY_TEST_POSTGRES_URL is not set: run the suite with scripts/test.sh, which starts a throw-away PostgreSQL")
    })
}

/// One instance: its own store connection (its own instance id) and its own gate.
async fn instance(max_per_key: usize) -> (AppState, Arc<Semaphore>) {
    let store = PgStore::connect(&postgres_url()).await.unwrap();
    let gate = Arc::new(Semaphore::new(OPEN_GATE));
    let settings = ServerSettings {
        api_keys: vec![
            ApiKey::new(ALICE, None, false),
            ApiKey::new(BOB, Some("bob"), false),
        ],
        max_concurrent_turns_per_key: max_per_key,
        ..ServerSettings::default()
    };
    let state = AppState::shared(
        Arc::new(store.clone()),
        Arc::new(store),
        Arc::new(TestBackend {
            gate: Arc::clone(&gate),
        }),
        PolicyConfig::default(),
        settings,
    );
    (state, gate)
}

/// Holds every model call of an instance until the returned permits are dropped.
async fn hold(gate: &Semaphore) -> tokio::sync::SemaphorePermit<'_> {
    gate.acquire_many(gate.available_permits() as u32)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_started_on_one_instance_continues_on_the_other() {
    let ((a, _), (b, _)) = (instance(8).await, instance(8).await);
    let (id, (end, _)) = turn(&a, json!({"message": "first", "model": "model-b"}), ALICE).await;
    assert_eq!(end, "done");
    // B finds it, keeps its model, and adds to it.
    let (_, body) = send(
        &b,
        post(
            "/v1/chat",
            json!({"conversation_id": id, "message": "second"}),
            Some(ALICE),
        ),
    )
    .await;
    let events = events(&body);
    assert_eq!(events[0].1["model"], "model-b");
    assert_eq!(events.last().unwrap().0, "done", "{body}");
    // Both see the whole conversation; Bob sees it on neither.
    for at in [&a, &b] {
        let (_, detail) = send(at, get(&format!("/v1/conversations/{id}"), ALICE)).await;
        let detail: serde_json::Value = serde_json::from_str(&detail).unwrap();
        assert_eq!(detail["turns"].as_array().unwrap().len(), 2);
        let (status, _) = send(at, get(&format!("/v1/conversations/{id}"), BOB)).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_sent_to_one_instance_stops_the_turn_running_on_the_other() {
    let ((a, gate_a), (b, _)) = (instance(8).await, instance(8).await);
    let held = hold(&gate_a).await;
    let running = app(a.clone())
        .oneshot(post("/v1/chat", json!({"message": "slow"}), Some(ALICE)))
        .await
        .unwrap();
    let mut body = running.into_body().into_data_stream();
    let first = futures::StreamExt::next(&mut body).await.unwrap().unwrap();
    let opening = events(&String::from_utf8_lossy(&first));
    let (turn_id, conversation) = (
        opening[0].1["turn_id"].as_str().unwrap().to_owned(),
        opening[0].1["conversation_id"].as_str().unwrap().to_owned(),
    );
    let cancel = |key: &str| {
        Request::post(format!("/v1/turns/{turn_id}/cancel"))
            .header("authorization", format!("Bearer {key}"))
            .body(Body::empty())
            .unwrap()
    };
    let (status, _) = send(&b, cancel(BOB)).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "Bob cannot cancel Alice's turn"
    );
    let (status, reply) = send(&b, cancel(ALICE)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{reply}");
    let mut rest = String::new();
    let read = async {
        while let Some(chunk) = futures::StreamExt::next(&mut body).await {
            rest.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), read)
        .await
        .expect("the turn on A ends after the cancel sent to B");
    let end = events(&rest).last().cloned().unwrap();
    assert_eq!(
        (end.0.as_str(), end.1["reason"].as_str()),
        ("done", Some("cancelled"))
    );
    drop(held);
    // Recorded as cancelled, and the conversation is free again on both instances.
    let (_, detail) = send(&b, get(&format!("/v1/conversations/{conversation}"), ALICE)).await;
    let detail: serde_json::Value = serde_json::from_str(&detail).unwrap();
    assert_eq!(detail["turns"][0]["stop_reason"], "cancelled");
    gate_a.add_permits(1000);
    let (_, (end, _)) = turn(
        &b,
        json!({"conversation_id": conversation, "message": "again"}),
        ALICE,
    )
    .await;
    assert_eq!(end, "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_turn_per_conversation_and_the_key_cap_hold_across_instances() {
    let ((a, gate_a), (b, _)) = (instance(2).await, instance(2).await);
    let (id, _) = turn(&a, json!({"message": "first"}), ALICE).await;
    let held = hold(&gate_a).await;
    let router = app(a.clone());
    let running = router
        .clone()
        .oneshot(post(
            "/v1/chat",
            json!({"conversation_id": id, "message": "second"}),
            Some(ALICE),
        ))
        .await
        .unwrap();
    assert_eq!(running.status(), StatusCode::OK);
    // The conversation is busy on B too.
    let (status, body) = send(
        &b,
        post(
            "/v1/chat",
            json!({"conversation_id": id, "message": "parallel"}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // Alice's cap is 2 over both instances: one more runs (on A), then B refuses.
    let second = router
        .oneshot(post("/v1/chat", json!({"message": "another"}), Some(ALICE)))
        .await
        .unwrap();
    assert_eq!(second.status(), StatusCode::OK);
    let (status, body) = send(
        &b,
        post("/v1/chat", json!({"message": "one too many"}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    // Bob's own quota is untouched.
    let (status, _) = send(&b, post("/v1/chat", json!({"message": "bob"}), Some(BOB))).await;
    assert_eq!(status, StatusCode::OK);
    drop(held);
    gate_a.add_permits(1000);
    for response in [running, second] {
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        assert!(String::from_utf8_lossy(&body).contains("event: done"));
    }
    // Free again everywhere.
    let (_, (end, _)) = turn(
        &b,
        json!({"conversation_id": id, "message": "third"}),
        ALICE,
    )
    .await;
    assert_eq!(end, "done");
}
