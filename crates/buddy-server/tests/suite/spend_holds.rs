//! Spend ceilings against parallel turns (issue 46 item 9, issue 59 item 2): each model
//! call reserves its worst case of the key's room before it starts, so turns of one key
//! started at once all run and never together pass its ceiling; a model without a price
//! is refused under a ceiling instead of running uncounted.

use std::sync::Arc;

use axum::http::StatusCode;
use buddy_core::{Price, Usd};
use buddy_engine::PolicyConfig;
use buddy_server::{ApiKey, AppState, ServerSettings, SpendCeiling};
use buddy_store::{SqliteStore, Store};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::sharing::{ALICE, TestBackend, events};
use super::{post, send};

/// A server whose Alice may spend `daily` a day; every model call costs $0.02 when
/// `priced`. Model calls wait at the gate (closed: no permits) until the test opens it.
fn server(daily: f64, priced: bool) -> (AppState, Arc<Semaphore>, Arc<dyn Store>) {
    let gate = Arc::new(Semaphore::new(0));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::in_memory().unwrap());
    let mut settings = ServerSettings {
        api_keys: vec![ApiKey::new(ALICE, None, false).with_spend(SpendCeiling {
            daily: Usd::from_dollars(daily),
            monthly: None,
        })],
        ..ServerSettings::default()
    };
    if priced {
        // 5 output tokens a reply at $4,000 per million, input free, and each call may write
        // 5 tokens: $0.02 a call, its worst case.
        let price = Price::new(0.0, 4_000.0);
        settings.prices.add(None, "*", price);
    }
    let backend = Arc::new(TestBackend {
        gate: Arc::clone(&gate),
    });
    let state = AppState::new(
        Arc::clone(&store),
        backend,
        PolicyConfig::default(),
        settings,
    );
    (state, gate, store)
}

/// Starts `n` turns of Alice at once (model calls held at the gate), opens the gate once
/// the first has ended (its calls found no room) or a few seconds passed, and returns
/// each answer: its status and its last event's data (or the error body).
async fn at_once(
    state: &AppState,
    gate: &Semaphore,
    n: usize,
    body: Value,
) -> Vec<(StatusCode, Value)> {
    let turns: Vec<_> = (0..n)
        .map(|_| {
            let (state, body) = (state.clone(), body.clone());
            tokio::spawn(async move { send(&state, post("/v1/chat", body, Some(ALICE))).await })
        })
        .collect();
    let first_ended = async {
        while !turns.iter().any(|t| t.is_finished()) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), first_ended).await;
    gate.add_permits(1 << 20);
    let mut out = Vec::new();
    for turn in turns {
        let (status, text) = turn.await.unwrap();
        out.push(super::spend_ledger_instances::answer_of(status, &text));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_started_at_once_run_together_and_never_together_pass_the_keys_ceiling() {
    // $0.10 a day; a turn (a call and its answer) costs $0.04. All eight start; each call
    // reserves its worst case before it starts, so those that find no room end
    // `cost_budget` with an answer, and together they stay within the ceiling.
    let (state, gate, store) = server(0.10, true);
    let turns = at_once(
        &state,
        &gate,
        8,
        json!({"message": "look it up", "sampling": {"max_output_tokens": 5}}),
    )
    .await;
    let owner = ApiKey::new(ALICE, None, false).owner();
    super::spend_ledger_instances::ran_within_the_ceiling(&turns, &*store, &owner, 0.10).await;
    // Every reservation was settled: at the ceiling or not, a new turn sees all the room
    // that is not spent, none held.
    let spent = store.spend_since(&owner, "2000-01-01").await.unwrap();
    assert_eq!(
        super::spend_ledger_instances::room_left(&*store, &owner, 0.10).await,
        Usd::from_nanos(Usd::from_dollars(0.10).unwrap().nanos() - spent.nanos())
    );
}

#[tokio::test]
async fn a_model_without_a_price_is_refused_under_a_ceiling() {
    let (state, gate, _) = server(1.0, false);
    gate.add_permits(1 << 20);
    let (status, text) = send(
        &state,
        post("/v1/chat", json!({"message": "hi"}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(
        text.contains("model `model-a` has no price") && text.contains("buddy.toml (`prices`"),
        "{text}"
    );
    // The OpenAI endpoints too.
    let (status, _) = send(
        &state,
        post(
            "/v1/chat/completions",
            json!({"model": "model-a", "messages": [{"role": "user", "content": "hi"}]}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_key_at_its_ceiling_gets_a_completed_response_saying_so_not_a_429() {
    // Responses clients (codex) retry a 429 and then report a failure: at the ceiling they
    // get an ordinary completed response whose message says why, whole and streamed.
    let (state, gate, _) = server(0.02, true);
    gate.add_permits(1 << 20);
    let ask = |stream: bool| {
        post(
            "/v1/responses",
            json!({"model": "model-a", "input": "hi", "stream": stream, "store": false, "max_output_tokens": 5}),
            Some(ALICE),
        )
    };
    let (status, text) = send(&state, ask(false)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let (status, text) = send(&state, ask(false)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let response: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(response["status"], "completed", "{response}");
    let said = response["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        said.contains("this key has reached its spend ceiling")
            && said.contains("has spent $0.0200 today"),
        "{said}"
    );
    let (status, text) = send(&state, ask(true)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let streamed: Vec<(String, Value)> = events(&text)
        .into_iter()
        .filter(|(_, data)| !data.is_null())
        .collect();
    let names: Vec<&str> = streamed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"response.created"), "{names:?}");
    assert!(names.contains(&"response.output_text.delta"), "{names:?}");
    let (name, completed) = streamed.last().unwrap();
    assert_eq!(name, "response.completed");
    assert_eq!(completed["response"]["status"], "completed");
    assert_eq!(completed["sequence_number"], names.len() - 1);
}
