//! A conversation's messages on PostgreSQL: each append one statement.

use super::PgPool;
use buddy_core::{BoxFuture, Message, TokenCount};
use sqlx::Row;

use super::PgStore;
use super::owner_bytes::REMOVE_MESSAGES;
use super::rows::backend;
use super::writes::{APPEND_MESSAGES, APPEND_ROUND, MessageColumns, with_messages, write};
use crate::columns::{decode, nanos, stored_count};
use crate::error::StoreError;
use crate::records::CountedHistory;
use crate::store::History;

impl History for PgStore {
    fn load_counted<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<CountedHistory, StoreError>> {
        Box::pin(load(&self.inner.pool, id))
    }

    fn append_counted<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        messages: &'a [Message],
        counts: &'a [Option<TokenCount>],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(append(
            &self.inner.pool,
            APPEND_MESSAGES,
            id,
            turn_id,
            messages,
            counts,
            &[],
        ))
    }

    fn append_history<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        history: &'a CountedHistory,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let CountedHistory {
            messages,
            counts,
            times_ms,
        } = history;
        // A turn's rounds (the turn's sink writes them so): counted when the turn ends.
        Box::pin(append(
            &self.inner.pool,
            APPEND_ROUND,
            id,
            turn_id,
            messages,
            counts,
            times_ms,
        ))
    }

    fn remove_messages<'a>(
        &'a self,
        conversation: &'a str,
        seqs: &'a [i64],
    ) -> BoxFuture<'a, Result<usize, StoreError>> {
        Box::pin(async move {
            let removed: i64 = sqlx::query(REMOVE_MESSAGES)
                .bind(conversation)
                .bind(seqs)
                .fetch_one(&self.inner.pool)
                .await
                .and_then(|row| row.try_get(0))
                .map_err(backend)?;
            Ok(usize::try_from(removed).unwrap_or_default())
        })
    }

    fn stored_bytes<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(bytes_of_owner(&self.inner.pool, owner))
    }
}

/// A conversation's messages with their counts, in one statement: the conversation's
/// row joined to its messages (none: no such conversation; one without a message: an
/// empty one).
async fn load(pool: &PgPool, id: &str) -> Result<CountedHistory, StoreError> {
    let rows = sqlx::query(
        "SELECT m.body, m.tokens, m.token_encoding FROM buddy_conversations c
         LEFT JOIN buddy_messages m ON m.conversation_id = c.id
         WHERE c.id = $1 ORDER BY m.seq",
    )
    .bind(id)
    .fetch_all(pool)
    .await
    .map_err(backend)?;
    if rows.is_empty() {
        return Err(StoreError::NotFound(id.to_owned()));
    }
    let mut history = CountedHistory::default();
    for row in &rows {
        let Some(body) = row.try_get::<Option<String>, _>(0).map_err(backend)? else {
            continue;
        };
        history.messages.push(decode(&body)?);
        history.counts.push(stored_count(
            row.try_get(1).map_err(backend)?,
            row.try_get(2).map_err(backend)?,
        ));
    }
    Ok(history)
}

/// Bytes of message JSON in `owner`'s conversations, running turns' writes not yet:
/// one row, kept by every write.
async fn bytes_of_owner(pool: &PgPool, owner: &str) -> Result<u64, StoreError> {
    let bytes: i64 = sqlx::query(
        "SELECT COALESCE((SELECT bytes FROM buddy_owner_turns WHERE owner = $1), 0)::BIGINT",
    )
    .bind(owner)
    .fetch_one(pool)
    .await
    .and_then(|row| row.try_get(0))
    .map_err(backend)?;
    Ok(nanos(bytes))
}

/// Appends messages in one statement (`sql`: `APPEND_MESSAGES` or `APPEND_ROUND`), each
/// at its time in `times` (when it has one there) or at the time of the write.
async fn append(
    pool: &PgPool,
    sql: &'static str,
    id: &str,
    turn_id: &str,
    messages: &[Message],
    counts: &[Option<TokenCount>],
    times: &[i64],
) -> Result<(), StoreError> {
    let columns = MessageColumns::of(messages, counts, times)?;
    let query = with_messages(sql, id, turn_id, &columns).bind(&columns.times);
    write(query, pool, id).await
}
