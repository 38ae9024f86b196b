//! The PostgreSQL store sends each statement without checking its connection first
//! (one round trip per write), so a connection the server ended must still be noticed
//! and replaced: checked when it has been idle, and after an error.

use std::sync::Arc;
use std::time::Duration;

use buddy_engine::PolicyConfig;
use buddy_server::{ApiKey, AppState, ServerSettings};
use buddy_store::PgStore;
use serde_json::json;
use sqlx::Connection;
use tokio::sync::Semaphore;

use super::sharing::{ALICE, OPEN_GATE, TestBackend, events};
use super::{post, send};

/// The PostgreSQL `scripts/test.sh` started.
fn postgres_url() -> String {
    std::env::var("BUDDY_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!("BUDDY_TEST_POSTGRES_URL is not set: run the suite with scripts/test.sh, which starts a throw-away PostgreSQL")
    })
}

/// `url` with the sessions it opens named `name` (so a test ends only its own).
fn named(url: &str, name: &str) -> String {
    let joint = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joint}application_name={name}")
}

/// An instance on its own store connection to `url`.
async fn instance(url: &str) -> AppState {
    let store = PgStore::connect(url).await.unwrap();
    AppState::shared(
        Arc::new(store.clone()),
        Arc::new(store),
        Arc::new(TestBackend {
            gate: Arc::new(Semaphore::new(OPEN_GATE)),
        }),
        PolicyConfig::default(),
        ServerSettings {
            api_keys: vec![ApiKey::new(ALICE, None, false)],
            ..ServerSettings::default()
        },
    )
}

/// A turn (a tool round and the answer) continuing `conversation` (or a new one): its
/// status, and its last event's name.
async fn a_turn(state: &AppState, conversation: Option<&str>) -> (u16, String, String) {
    let mut body = json!({"message": "look it up"});
    if let Some(id) = conversation {
        body["conversation_id"] = json!(id);
    }
    let (status, text) = send(state, post("/v1/chat", body, Some(ALICE))).await;
    let events = events(&text);
    let id = events
        .first()
        .and_then(|(_, data)| data["conversation_id"].as_str())
        .unwrap_or_default()
        .to_owned();
    let last = events
        .last()
        .map(|(name, _)| name.clone())
        .unwrap_or_default();
    (status.as_u16(), id, last)
}

/// Ends every server-side session named `name`; how many there were.
async fn terminate(admin: &mut sqlx::PgConnection, name: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) AS ended",
    )
    .bind(name)
    .fetch_one(admin)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_server_ended_is_replaced_and_the_next_turn_succeeds() {
    let url = postgres_url();
    let name = format!("buddy_killed_{}", std::process::id());
    let state = instance(&named(&url, &name)).await;
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();

    let (status, id, last) = a_turn(&state, None).await;
    assert_eq!((status, last.as_str()), (200, "done"));

    // Between two turns, every session of the store is ended (as a restart or an
    // administrator would); the pool's connections are all dead.
    assert!(terminate(&mut admin, &name).await >= 1);
    // Idle past the check: the dead connections are found before a statement is sent.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let (status, again, last) = a_turn(&state, Some(&id)).await;
    assert_eq!(
        (status, last.as_str()),
        (200, "done"),
        "the turn after the kill"
    );
    assert_eq!(again, id);

    // Ended again, and the next turn comes at once (no idle check): its first statement
    // may meet a dead connection and fail (a retryable 503 or an error event), but that
    // makes the pool check every idle connection, so the turn after it succeeds. (New
    // conversations: a failed turn may leave its own conversation claimed.)
    assert!(terminate(&mut admin, &name).await >= 1);
    let (status, _, last) = a_turn(&state, None).await;
    assert!(
        (status == 200 && ["done", "error"].contains(&last.as_str())) || status == 503,
        "{status} {last}"
    );
    let (status, _, last) = a_turn(&state, None).await;
    assert_eq!(
        (status, last.as_str()),
        (200, "done"),
        "the turn after the failed one"
    );

    // The first conversation holds both its turns, written on any connection.
    let (status, detail) = send(
        &state,
        super::sharing::get(&format!("/v1/conversations/{id}"), ALICE),
    )
    .await;
    assert_eq!(status.as_u16(), 200);
    let detail: serde_json::Value = serde_json::from_str(&detail).unwrap();
    assert!(detail["turns"].as_array().unwrap().len() == 2, "{detail}");
}
