//! Forks on PostgreSQL, each in one transaction.

use super::PgPool;
use buddy_core::BoxFuture;

use super::PgStore;
use super::owner_bytes::COPY_MESSAGES;
use super::rows::backend;
use crate::columns::{new_id, now_ms};
use crate::error::StoreError;
use crate::records::ForkCopy;
use crate::store::Forks;

impl Forks for PgStore {
    fn fork_conversation<'a>(
        &'a self,
        fork: ForkCopy<'a>,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(write(&self.inner.pool, fork))
    }
}

/// Writes `fork`: the conversation with the original's title and settings, the messages
/// before index `before` with their numbers, times and counts (its `last_seq` the last
/// of them), then the copied turns' records, their messages renamed to them.
async fn write(pool: &PgPool, fork: ForkCopy<'_>) -> Result<String, StoreError> {
    let id = new_id("conv");
    let before = i64::try_from(fork.before).unwrap_or(i64::MAX);
    let mut tx = pool.begin().await.map_err(backend)?;
    let created = sqlx::query(
        "INSERT INTO buddy_conversations (id, owner, created_at_ms, updated_at_ms, title, settings, forked_from, fork_before, last_seq)
         SELECT $1, $2, $3, $3, title, settings, id, $4, 0 FROM buddy_conversations WHERE id = $5",
    )
    .bind(&id)
    .bind(fork.owner)
    .bind(now_ms())
    .bind(before)
    .bind(fork.from)
    .execute(&mut *tx)
    .await
    .map_err(backend)?;
    if created.rows_affected() == 0 {
        return Err(StoreError::NotFound(fork.from.to_owned()));
    }
    // The first `before` messages, by number (numbers are never reused, so not 1..before).
    sqlx::query(COPY_MESSAGES)
        .bind(&id)
        .bind(fork.from)
        .bind(before)
        .bind(fork.owner)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
    sqlx::query(
        "UPDATE buddy_conversations
         SET last_seq = (SELECT COALESCE(MAX(seq), 0) FROM buddy_messages WHERE conversation_id = $1)
         WHERE id = $1",
    )
    .bind(&id)
    .execute(&mut *tx)
    .await
    .map_err(backend)?;
    for (original, copy) in fork.turns {
        sqlx::query(
            "INSERT INTO buddy_turns (id, conversation_id, model, instance, started_at_ms, finished_at_ms, stop_reason, stats, error, tape, hidden)
             SELECT $1, $2, model, instance, started_at_ms, finished_at_ms, stop_reason, stats, error, tape, hidden
             FROM buddy_turns WHERE id = $3 AND conversation_id = $4",
        )
        .bind(copy)
        .bind(&id)
        .bind(original)
        .bind(fork.from)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        sqlx::query(
            "UPDATE buddy_messages SET turn_id = $3 WHERE conversation_id = $1 AND turn_id = $2",
        )
        .bind(&id)
        .bind(original)
        .bind(copy)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
    }
    tx.commit().await.map_err(backend)?;
    Ok(id)
}
