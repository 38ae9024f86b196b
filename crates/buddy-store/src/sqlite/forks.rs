//! Forks on SQLite, each in one transaction.

use buddy_core::BoxFuture;
use rusqlite::params;

use super::{SqliteStore, backend};
use crate::columns::{new_id, now_ms};
use crate::error::StoreError;
use crate::records::ForkCopy;
use crate::store::Forks;

/// Writes a fork of `from` inside `tx` (see [`ForkCopy`]): the conversation with the
/// original's title and settings, the copied turns' records, then the messages before
/// index `before` with their numbers, times and counts.
fn fork_in(
    tx: &rusqlite::Transaction<'_>,
    from: &str,
    owner: &str,
    before: usize,
    turns: &[(String, String)],
) -> Result<String, StoreError> {
    let id = new_id("conv");
    let before_n = i64::try_from(before).unwrap_or(i64::MAX);
    let created = tx
        .execute(
            "INSERT INTO conversations (id, created_at_ms, updated_at_ms, owner, title, settings, forked_from, fork_before)
             SELECT ?1, ?2, ?2, ?3, title, settings, id, ?4 FROM conversations WHERE id = ?5",
            params![id, now_ms(), owner, before_n, from],
        )
        .map_err(backend)?;
    if created == 0 {
        return Err(StoreError::NotFound(from.to_owned()));
    }
    // The first `before` messages, by number (numbers are never reused, so not 1..before).
    tx.execute(
        "INSERT INTO messages (conversation_id, seq, turn_id, role, body, created_at_ms, tokens, token_encoding)
         SELECT ?1, seq, turn_id, role, body, created_at_ms, tokens, token_encoding FROM messages
         WHERE conversation_id = ?2 AND seq IN (SELECT seq FROM messages WHERE conversation_id = ?2 ORDER BY seq LIMIT ?3)",
        params![id, from, before_n],
    )
    .map_err(backend)?;
    for (original, copy) in turns {
        tx.execute(
            "INSERT INTO turns (id, conversation_id, model, started_at_ms, finished_at_ms, stop_reason, stats, error, tape, hidden)
             SELECT ?1, ?2, model, started_at_ms, finished_at_ms, stop_reason, stats, error, tape, hidden
             FROM turns WHERE id = ?3 AND conversation_id = ?4",
            params![copy, id, original, from],
        )
        .map_err(backend)?;
        tx.execute(
            "UPDATE messages SET turn_id = ?3 WHERE conversation_id = ?1 AND turn_id = ?2",
            params![id, original, copy],
        )
        .map_err(backend)?;
    }
    Ok(id)
}

impl Forks for SqliteStore {
    fn fork_conversation<'a>(
        &'a self,
        fork: ForkCopy<'a>,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        let (from, owner) = (fork.from.to_owned(), fork.owner.to_owned());
        let (before, turns) = (fork.before, fork.turns.to_vec());
        self.run(move |conn| {
            let tx = conn.transaction().map_err(backend)?;
            let id = fork_in(&tx, &from, &owner, before, &turns)?;
            tx.commit().map_err(backend)?;
            Ok(id)
        })
    }
}
