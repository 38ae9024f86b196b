//! Holds tied to life (issue 60, item 4): a spend hold lives only as long as the turn
//! that took it can still settle it. A crashed PostgreSQL instance's holds are released
//! as soon as its heartbeat has lapsed (its turns are marked `interrupted` by the same
//! rule), not an hour later; a SQLite store reopened after a crash holds nothing.

use buddy_core::Usd;
use buddy_store::prelude::*;
use buddy_store::{PgStore, SpendHold, SqliteStore, Store};

fn cents(n: u64) -> Usd {
    Usd::from_nanos(n * 10_000_000)
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// A hold of all of `owner`'s room (an hour long, as a turn's without a deadline).
async fn hold_all(store: &dyn Store, owner: &str, ceilings: &[(String, Usd)]) -> Usd {
    let now = now_ms();
    store
        .hold_spend(SpendHold {
            owner,
            id: &buddy_store::new_id("hold"),
            wanted: None,
            ceilings,
            now_ms: now,
            expires_at_ms: now + 3_600_000,
        })
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_instances_holds_are_released_once_its_heartbeat_lapses() {
    let url = super::postgres_url();
    let crashed = PgStore::connect(&url).await.unwrap();
    let alive = PgStore::connect(&url).await.unwrap();
    let owner = format!("owner_{}", crashed.instance());
    let ceilings = vec![("2026-11-01".to_owned(), cents(10))];
    // The crashed instance's running turn holds the key's whole room...
    let conversation = crashed.create_conversation("holds").await.unwrap();
    let turn = buddy_store::new_id("turn");
    crashed.begin_turn(&conversation, &turn, "m").await.unwrap();
    assert_eq!(hold_all(&crashed, &owner, &ceilings).await, cents(10));
    // ...so while it lives, another instance's turn of that key finds none.
    assert_eq!(hold_all(&alive, &owner, &ceilings).await, Usd::ZERO);
    // The instance dies without settling: its heartbeat stops and lapses.
    let instance = crashed.instance().to_owned();
    drop(crashed);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let raw = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query("UPDATE buddy_instances SET last_seen_ms = 0 WHERE id = $1")
        .bind(&instance)
        .execute(&raw)
        .await
        .unwrap();
    // At once, not an hour later: the key's room is whole again.
    assert_eq!(hold_all(&alive, &owner, &ceilings).await, cents(10));
    // And the crashed turn is marked interrupted by the same rule (a new instance's sweep).
    let sweeper = PgStore::connect(&url).await.unwrap();
    let detail = sweeper
        .get_conversation(&conversation)
        .await
        .unwrap()
        .unwrap();
    let ended = detail.turns.iter().find(|t| t.id == turn).unwrap();
    assert_eq!(
        ended.stop_reason.map(|r| r.as_str()),
        Some("interrupted"),
        "{ended:?}"
    );
}

#[tokio::test]
async fn a_sqlite_store_reopened_after_a_crash_holds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holds.db");
    let owner = "owner_sqlite";
    let ceilings = vec![("2026-11-01".to_owned(), cents(10))];
    let crashed = SqliteStore::open(&path).unwrap();
    assert_eq!(hold_all(&crashed, owner, &ceilings).await, cents(10));
    assert_eq!(hold_all(&crashed, owner, &ceilings).await, Usd::ZERO);
    drop(crashed);
    let restarted = SqliteStore::open(&path).unwrap();
    assert_eq!(hold_all(&restarted, owner, &ceilings).await, cents(10));
}
