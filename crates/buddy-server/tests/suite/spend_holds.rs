//! Spend ceilings against parallel turns (issue 46, item 9): each turn holds the room it
//! may spend before it starts, so turns of one key started at once never together pass
//! its ceiling; a model without a price is refused under a ceiling instead of running
//! uncounted.

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
        // 10 input + 5 output tokens a reply: $0.02 a call.
        let price = Price::new(1_000.0, 2_000.0);
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

/// Starts `n` turns of Alice at once (each held at the gate), opens the gate once all
/// but `held` have been answered (refused), and returns each answer: its status and its
/// last event's data (or the error body).
async fn at_once(
    state: &AppState,
    gate: &Semaphore,
    n: usize,
    held: usize,
    body: Value,
) -> Vec<(StatusCode, Value)> {
    let turns: Vec<_> = (0..n)
        .map(|_| {
            let (state, body) = (state.clone(), body.clone());
            tokio::spawn(async move { send(&state, post("/v1/chat", body, Some(ALICE))).await })
        })
        .collect();
    // Every turn has been held or refused before any model call returns: the refused
    // ones have answered, the held ones wait at the gate (however slow the machine is).
    let settled = async {
        while turns.iter().filter(|t| t.is_finished()).count() < n - held {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(20), settled).await;
    gate.add_permits(1 << 20);
    let mut out = Vec::new();
    for turn in turns {
        let (status, text) = turn.await.unwrap();
        let data = match status {
            StatusCode::OK => events(&text)
                .last()
                .map(|(_, d)| d.clone())
                .unwrap_or_default(),
            _ => serde_json::from_str(&text).unwrap_or_default(),
        };
        out.push((status, data));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_started_at_once_never_together_pass_the_keys_ceiling() {
    // $0.10 a day; a turn (a call and its answer) costs $0.04. Eight at once used to
    // spend 4.8 times the ceiling: now the first holds all the room and the rest wait.
    let (state, gate, store) = server(0.10, true);
    let answers = at_once(&state, &gate, 8, 1, json!({"message": "look it up"})).await;
    let ran = answers.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    assert_eq!(ran, 1, "{answers:?}");
    for (status, body) in answers.iter().filter(|(s, _)| *s != StatusCode::OK) {
        assert_eq!(*status, StatusCode::TOO_MANY_REQUESTS, "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("running turns hold the rest"), "{message}");
    }
    // With a budget per turn several fit, and together they stay within the ceiling:
    // $0.04 spent, $0.06 left: one turn of $0.04 and one of the last $0.02.
    let answers = at_once(
        &state,
        &gate,
        8,
        2,
        json!({"message": "look it up", "policy": {"max_turn_cost_usd": 0.04}}),
    )
    .await;
    let ran: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::OK)
        .map(|(_, d)| d)
        .collect();
    assert_eq!(ran.len(), 2, "{answers:?}");
    let owner = ApiKey::new(ALICE, None, false).owner();
    let spent = store.spend_since(&owner, "2000-01-01").await.unwrap();
    assert_eq!(
        spent,
        Usd::from_dollars(0.10).unwrap(),
        "never past the ceiling"
    );
    // Every hold was settled: at the ceiling now, refused as spent, not as held.
    let (status, text) = send(
        &state,
        post("/v1/chat", json!({"message": "hi"}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(text.contains("has spent $0.1000 today"), "{text}");
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
            json!({"model": "model-a", "input": "hi", "stream": stream, "store": false}),
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
