//! Money as a live shared ledger over two instances on one PostgreSQL (issue 59 item 2):
//! eight turns of one key with a small ceiling, spread over both, all start; each model
//! call reserves its worst case before it starts and settles to its cost after, so the
//! key's spend never passes its ceiling, and each turn that could not reserve ends
//! `cost_budget` with an answer that says so, not a 429.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use buddy_core::{Price, Usd};
use buddy_engine::PolicyConfig;
use buddy_server::{ApiKey, AppState, ServerSettings, SpendCeiling};
use buddy_store::{PgStore, SpendHold, Store};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::sharing::{TestBackend, events};
use super::{post, send};

/// A turn's answer: its status and its last event's data (or the error body).
pub(super) fn answer_of(status: StatusCode, text: &str) -> (StatusCode, Value) {
    let data = match status {
        StatusCode::OK => events(text)
            .last()
            .map(|(_, d)| d.clone())
            .unwrap_or_default(),
        _ => serde_json::from_str(text).unwrap_or_default(),
    };
    (status, data)
}

/// What `owner` may still hold under a daily ceiling of `dollars`: the ceiling less what
/// it spent and what live holds hold (read by holding nothing).
pub(super) async fn room_left(store: &dyn Store, owner: &str, dollars: f64) -> Usd {
    let today = time::OffsetDateTime::now_utc().date();
    let day = format!(
        "{:04}-{:02}-{:02}",
        today.year(),
        u8::from(today.month()),
        today.day()
    );
    let ceilings = [(day, Usd::from_dollars(dollars).unwrap())];
    let now = time::OffsetDateTime::now_utc().unix_timestamp() * 1000;
    // A hold of all the room left, at once settled at no cost.
    let id = buddy_store::new_id("probe");
    let room = store
        .hold_spend(SpendHold {
            owner,
            id: &id,
            wanted: None,
            ceilings: &ceilings,
            now_ms: now,
            expires_at_ms: now + 60_000,
        })
        .await
        .unwrap();
    store
        .settle_spend(owner, &id, &ceilings[0].0, Usd::ZERO)
        .await
        .unwrap();
    room
}

/// The turns all started (200, a `done`), several made model calls side by side (none
/// held the key's whole room), those out of room ended `cost_budget` saying so, and
/// `owner`'s spend stayed within `dollars`.
pub(super) async fn ran_within_the_ceiling(
    turns: &[(StatusCode, Value)],
    store: &dyn Store,
    owner: &str,
    dollars: f64,
) {
    let mut out_of_room = 0;
    let mut called = 0;
    for (status, done) in turns {
        assert_eq!(*status, StatusCode::OK, "every turn starts: {done}");
        if done["stats"]["model_calls"].as_u64().unwrap_or(0) > 0 {
            called += 1;
        }
        match done["reason"].as_str() {
            Some("completed") => {}
            Some("cost_budget") => {
                out_of_room += 1;
                let answer = done["answer"].as_str().unwrap_or_default();
                assert!(
                    answer.contains("this key has reached its spend ceiling")
                        && answer.contains("calls in flight"),
                    "{answer}"
                );
            }
            other => panic!("a turn ended {other:?}: {done}"),
        }
    }
    // Five calls of $0.02 fit at once: five turns' first calls ran together.
    assert!(called >= 2, "{turns:?}");
    assert!(
        out_of_room >= 1,
        "eight turns of $0.04 cannot all fit $0.10: {turns:?}"
    );
    // Each call reserved at least its real cost, so the booked total stays within the
    // ceiling itself (the bound is the ceiling plus the calls in flight's worst case).
    let spent = store.spend_since(owner, "2000-01-01").await.unwrap();
    let ceiling = Usd::from_dollars(dollars).unwrap();
    assert!(
        spent <= ceiling,
        "{spent} spent past a ceiling of {ceiling}"
    );
    assert!(
        spent >= Usd::from_dollars(0.04).unwrap(),
        "a completed turn booked its cost: {spent}"
    );
}

/// One instance whose key `key` may spend `daily` a day; every model call costs $0.02
/// and waits for a permit of the returned gate.
async fn instance(key: &str, daily: f64) -> (AppState, Arc<Semaphore>, Arc<dyn Store>) {
    let url = std::env::var("BUDDY_TEST_POSTGRES_URL")
        .expect("BUDDY_TEST_POSTGRES_URL is not set: run the suite with scripts/test.sh");
    let store = PgStore::connect(&url).await.unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let mut settings = ServerSettings {
        api_keys: vec![ApiKey::new(key, None, false).with_spend(SpendCeiling {
            daily: Usd::from_dollars(daily),
            monthly: None,
        })],
        ..ServerSettings::default()
    };
    // 5 output tokens a reply at $4,000 per million, input free, and each call may write
    // 5 tokens: $0.02 a call, its worst case.
    settings.prices.add(None, "*", Price::new(0.0, 4_000.0));
    let shared: Arc<dyn Store> = Arc::new(store.clone());
    let state = AppState::shared(
        Arc::clone(&shared),
        Arc::new(store),
        Arc::new(TestBackend {
            gate: Arc::clone(&gate),
        }),
        PolicyConfig::default(),
        settings,
    );
    (state, gate, shared)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_turns_of_one_key_over_two_instances_share_its_ceiling_live() {
    // A key of this run alone: the ledger outlives runs on one database.
    let key = format!("sk-live-{}", buddy_store::new_id("ledger"));
    let ((a, gate_a, store), (b, gate_b, _)) =
        (instance(&key, 0.10).await, instance(&key, 0.10).await);
    let body = json!({"message": "look it up", "sampling": {"max_output_tokens": 5}});
    let turns: Vec<_> = (0..8)
        .map(|i| {
            let at = if i % 2 == 0 { a.clone() } else { b.clone() };
            let (body, key) = (body.clone(), key.clone());
            tokio::spawn(async move { send(&at, post("/v1/chat", body, Some(&key))).await })
        })
        .collect();
    // The calls wait at the gates holding their reservations; those that found no room
    // end meanwhile. Then every call may go.
    let first_ended = async {
        while !turns.iter().any(|t| t.is_finished()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), first_ended).await;
    gate_a.add_permits(1 << 20);
    gate_b.add_permits(1 << 20);
    let mut answers = Vec::new();
    for turn in turns {
        let (status, text) = turn.await.unwrap();
        answers.push(answer_of(status, &text));
    }
    let owner = ApiKey::new(&key, None, false).owner();
    ran_within_the_ceiling(&answers, &*store, &owner, 0.10).await;
    // Nothing is held once they ended, on either instance.
    let spent = store.spend_since(&owner, "2000-01-01").await.unwrap();
    let ceiling = Usd::from_dollars(0.10).unwrap();
    assert_eq!(
        room_left(&*store, &owner, 0.10).await,
        Usd::from_nanos(ceiling.nanos() - spent.nanos())
    );
}
