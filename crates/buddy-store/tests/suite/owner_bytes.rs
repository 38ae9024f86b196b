//! The bytes a key's conversations hold (what the storage quota reads) are a count kept
//! by every write and removal, not a sum over the key's messages at every turn (issue
//! 59): the count must equal that sum after each kind of write, on both stores.

use buddy_core::{Message, StopReason, TurnStats};
use buddy_store::prelude::*;
use buddy_store::{
    CountedHistory, ForkCopy, PgStore, SqliteStore, Store, TurnClosing, TurnDeletion, TurnOpening,
};

/// The bytes of message JSON in `conversations`, read back message by message.
async fn recount(store: &dyn Store, conversations: &[&str]) -> u64 {
    let mut bytes = 0;
    for id in conversations {
        if let Some(detail) = store.get_conversation(id).await.unwrap() {
            for message in &detail.messages {
                bytes += buddy_core::json_exact(message, 0).unwrap().len() as u64;
            }
        }
    }
    bytes
}

/// Asserts the kept count equals the recount, after `step`.
async fn holds(store: &dyn Store, owner: &str, conversations: &[&str], step: &str) -> u64 {
    let kept = store.stored_bytes(owner).await.unwrap();
    let counted = recount(store, conversations).await;
    assert_eq!(
        kept, counted,
        "after {step}: kept {kept}, messages hold {counted}"
    );
    kept
}

/// Asserts the kept count is at most the recount while a turn runs (PostgreSQL counts a
/// turn's writes when it ends; SQLite at once).
async fn at_most(store: &dyn Store, owner: &str, conversations: &[&str], step: &str) {
    let kept = store.stored_bytes(owner).await.unwrap();
    let counted = recount(store, conversations).await;
    assert!(
        kept <= counted,
        "during {step}: kept {kept} over the {counted} held"
    );
}

/// A round as a turn's sink writes it.
fn round(text: &str) -> CountedHistory {
    CountedHistory {
        messages: vec![Message::assistant(text)],
        ..CountedHistory::default()
    }
}

fn opening<'a>(
    owner: &'a str,
    conversation: Option<&'a str>,
    turn: &'a str,
    messages: &'a [Message],
) -> TurnOpening<'a> {
    TurnOpening {
        conversation,
        owner,
        turn,
        model: "model-b",
        settings: None,
        messages,
        counts: &[],
        copied: &[],
        copied_turns: &[],
    }
}

/// Openings, rounds, closings, client items, forks, removed messages, deleted turns and
/// conversations each move the count by what they wrote or took away (a turn's writes
/// by the time it ends), and another key's never.
async fn the_count_follows_every_write(store: &dyn Store) {
    let owner = buddy_store::new_id("owner");
    let bystander = buddy_store::new_id("owner");
    let theirs = store.create_conversation(&bystander).await.unwrap();
    store
        .append_messages(&theirs, "t0", &[Message::user("not yours")])
        .await
        .unwrap();
    let theirs_before = store.stored_bytes(&bystander).await.unwrap();
    assert_eq!(store.stored_bytes(&owner).await.unwrap(), 0);

    let (one, two, three) = (
        buddy_store::new_id("turn"),
        buddy_store::new_id("turn"),
        buddy_store::new_id("turn"),
    );
    let asked = [Message::user("héllo — naïve bytes, not characters")];
    let id = store
        .open_turn(opening(&owner, None, &one, &asked))
        .await
        .unwrap();
    let all = [id.as_str()];
    at_most(store, &owner, &all, "a new conversation's opening").await;
    store
        .append_history(&id, &one, &round(&"x".repeat(5000)))
        .await
        .unwrap();
    at_most(store, &owner, &all, "a round").await;
    let stats = TurnStats::default();
    let last = round("done");
    let closing = |turn| TurnClosing {
        conversation: &id,
        turn,
        last: &last,
        reason: StopReason::Completed,
        stats: &stats,
        error: None,
        tape: None,
    };
    store.close_turn(closing(&one)).await.unwrap();
    let closed = holds(store, &owner, &all, "a closing").await;
    assert!(closed > 5000);
    store
        .append_messages(&id, "items", &[Message::user("a client's item")])
        .await
        .unwrap();
    holds(store, &owner, &all, "a client's items").await;
    let again = [Message::user("and again")];
    store
        .open_turn(opening(&owner, Some(&id), &two, &again))
        .await
        .unwrap();
    store.append_history(&id, &two, &round("on")).await.unwrap();
    at_most(store, &owner, &all, "a second turn").await;
    store
        .finish_turn(&two, StopReason::Completed, &stats, None, None)
        .await
        .unwrap();
    holds(store, &owner, &all, "an end without last messages").await;

    let turns = [(one.clone(), buddy_store::new_id("turn"))];
    let fork = ForkCopy {
        from: &id,
        owner: &owner,
        before: 2,
        turns: &turns,
    };
    let forked = store.fork_conversation(fork).await.unwrap();
    let both = [id.as_str(), forked.as_str()];
    holds(store, &owner, &both, "a fork").await;
    let seqs = store
        .get_conversation(&id)
        .await
        .unwrap()
        .unwrap()
        .message_seqs;
    assert_eq!(store.remove_messages(&id, &seqs[1..2]).await.unwrap(), 1);
    holds(store, &owner, &both, "a removed message").await;
    assert_eq!(
        store.delete_turn(&id, &two).await.unwrap(),
        TurnDeletion::Removed
    );
    holds(store, &owner, &both, "a deleted turn").await;
    // A conversation deleted while its turn runs takes that turn's writes along.
    store
        .open_turn(opening(&owner, Some(&forked), &three, &again))
        .await
        .unwrap();
    store
        .append_history(&forked, &three, &round("mid-turn"))
        .await
        .unwrap();
    assert!(store.delete_conversation(&forked).await.unwrap());
    holds(store, &owner, &both, "a conversation deleted mid-turn").await;
    assert_eq!(
        store.delete_turn(&id, &one).await.unwrap(),
        TurnDeletion::ConversationGone
    );
    assert_eq!(
        holds(store, &owner, &both, "the last turn deleted").await,
        0
    );
    assert_eq!(
        store.stored_bytes(&bystander).await.unwrap(),
        theirs_before,
        "another key's count did not move"
    );
}

#[tokio::test]
async fn sqlite_keeps_each_keys_stored_bytes() {
    let store = SqliteStore::in_memory().unwrap();
    the_count_follows_every_write(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_keeps_each_keys_stored_bytes() {
    let store = PgStore::connect(&super::postgres_url()).await.unwrap();
    the_count_follows_every_write(&store).await;
}

/// A turn whose instance died mid-turn is counted by the sweep that ends it
/// `interrupted` once the instance's heartbeat has lapsed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_instances_turn_is_counted_when_it_is_swept() {
    let url = super::postgres_url();
    let crashed = PgStore::connect(&url).await.unwrap();
    let owner = buddy_store::new_id("owner");
    let turn = buddy_store::new_id("turn");
    let asked = [Message::user("started before the crash")];
    let id = crashed
        .open_turn(opening(&owner, None, &turn, &asked))
        .await
        .unwrap();
    crashed
        .append_history(&id, &turn, &round(&"y".repeat(3000)))
        .await
        .unwrap();
    let instance = crashed.instance().to_owned();
    drop(crashed);
    let raw = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query("UPDATE buddy_instances SET last_seen_ms = 0 WHERE id = $1")
        .bind(&instance)
        .execute(&raw)
        .await
        .unwrap();
    // A new instance sweeps as it starts.
    let sweeper = PgStore::connect(&url).await.unwrap();
    let kept = holds(&sweeper, &owner, &[&id], "the sweep").await;
    assert!(kept > 3000);
}

/// A SQLite file written before the count existed is counted once when it is opened.
#[tokio::test]
async fn a_sqlite_file_from_before_the_count_is_counted_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let (id, owner) = {
        let store = SqliteStore::open(&path).unwrap();
        let owner = buddy_store::new_id("owner");
        let id = store.create_conversation(&owner).await.unwrap();
        store
            .append_messages(&id, "t0", &[Message::user("kept from before")])
            .await
            .unwrap();
        (id, owner)
    };
    // Back to the schema before the count: no table, no triggers.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    conn.execute_batch(
        "DROP TRIGGER messages_bytes_in; DROP TRIGGER messages_bytes_out;
         DROP TRIGGER conversation_messages_out; DROP TABLE owner_bytes;",
    )
    .unwrap();
    conn.pragma_update(None, "user_version", version - 1)
        .unwrap();
    drop(conn);
    let store = SqliteStore::open(&path).unwrap();
    let kept = holds(&store, &owner, &[&id], "opening a file from before").await;
    assert!(kept > 0);
}
