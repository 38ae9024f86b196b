//! Conversations as records on PostgreSQL.

use super::PgPool;
use buddy_core::{BoxFuture, Message};
use sqlx::Row;

use super::PgStore;
use super::owner_bytes::DELETE_CONVERSATION;
use super::rows::backend;
use crate::columns::{
    decode, first_user_title, fork_before, listed_title, new_id, now_ms, settings, turn_end,
};
use crate::error::StoreError;
use crate::records::{ConversationDetail, ConversationInfo, ConversationSummary, TurnRecord};
use crate::store::Conversations;

impl Conversations for PgStore {
    fn create_conversation<'a>(
        &'a self,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(async move {
            let id = new_id("conv");
            sqlx::query(
                "INSERT INTO buddy_conversations (id, owner, created_at_ms, updated_at_ms) VALUES ($1, $2, $3, $3)",
            )
            .bind(&id)
            .bind(owner)
            .bind(now_ms())
            .execute(&self.inner.pool)
            .await
            .map_err(backend)?;
            Ok(id)
        })
    }

    fn session_conversation<'a>(
        &'a self,
        owner: &'a str,
        session: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT id FROM buddy_conversations
                 WHERE owner = $1 AND (settings::jsonb -> 'metadata' ->> 'buddy_session') = $2
                 ORDER BY updated_at_ms DESC, id DESC LIMIT 1",
            )
            .bind(owner)
            .bind(session)
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(backend)?;
            row.map(|row| row.try_get::<String, _>(0).map_err(backend))
                .transpose()
        })
    }

    fn conversation_info<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConversationInfo>, StoreError>> {
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT owner,
                    (SELECT model FROM buddy_turns t WHERE t.conversation_id = c.id ORDER BY started_at_ms DESC, id DESC LIMIT 1),
                    settings
                 FROM buddy_conversations c WHERE id = $1",
            )
            .bind(id)
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(backend)?;
            row.map(|row| {
                Ok(ConversationInfo {
                    owner: row.try_get(0).map_err(backend)?,
                    last_model: row.try_get(1).map_err(backend)?,
                    settings: settings(
                        row.try_get::<Option<String>, _>(2)
                            .map_err(backend)?
                            .as_deref(),
                    )?,
                })
            })
            .transpose()
        })
    }

    fn list_conversations<'a>(
        &'a self,
        owner: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<ConversationSummary>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT c.id, c.created_at_ms, c.updated_at_ms,
                    (SELECT COUNT(*) FROM buddy_messages m WHERE m.conversation_id = c.id),
                    (SELECT body FROM buddy_messages m WHERE m.conversation_id = c.id AND m.role = 'user' ORDER BY seq LIMIT 1),
                    (SELECT stop_reason FROM buddy_turns t WHERE t.conversation_id = c.id ORDER BY started_at_ms DESC LIMIT 1),
                    c.title, c.forked_from, c.fork_before
                 FROM buddy_conversations c WHERE $1::TEXT IS NULL OR c.owner = $1
                 ORDER BY c.updated_at_ms DESC",
            )
            .bind(owner)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(backend)?;
            rows.iter()
                .map(|row| {
                    let count: i64 = row.try_get(3).map_err(backend)?;
                    // Read apart: one damaged row marks its conversation only.
                    let first_user = row.try_get::<Option<String>, _>(4).map_err(backend);
                    let named: Option<String> = row.try_get(6).map_err(backend)?;
                    let reason = row.try_get::<Option<String>, _>(5).map_err(backend);
                    Ok(ConversationSummary {
                        id: row.try_get(0).map_err(backend)?,
                        created_at_ms: row.try_get(1).map_err(backend)?,
                        updated_at_ms: row.try_get(2).map_err(backend)?,
                        messages: u64::try_from(count).unwrap_or(0),
                        title: listed_title(named, first_user),
                        last_stop_reason: reason.and_then(turn_end).unwrap_or(None),
                        forked_from: row.try_get(7).map_err(backend)?,
                        fork_before: fork_before(row.try_get(8).map_err(backend)?),
                    })
                })
                .collect()
        })
    }

    fn get_conversation<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConversationDetail>, StoreError>> {
        Box::pin(async move {
            let pool = &self.inner.pool;
            let created = sqlx::query(
                "SELECT created_at_ms, title, settings, forked_from, fork_before FROM buddy_conversations WHERE id = $1",
            )
            .bind(id)
            .fetch_optional(pool)
            .await
            .map_err(backend)?;
            let Some(created) = created else {
                return Ok(None);
            };
            let rows = sqlx::query(
                "SELECT body, turn_id, seq, created_at_ms FROM buddy_messages WHERE conversation_id = $1 ORDER BY seq",
            )
            .bind(id)
            .fetch_all(pool)
            .await
            .map_err(backend)?;
            let mut messages = Vec::with_capacity(rows.len());
            let mut message_turns = Vec::with_capacity(rows.len());
            let mut message_seqs = Vec::with_capacity(rows.len());
            let mut message_times_ms = Vec::with_capacity(rows.len());
            for row in &rows {
                let body: String = row.try_get(0).map_err(backend)?;
                messages.push(decode::<Message>(&body)?);
                message_turns.push(row.try_get(1).map_err(backend)?);
                message_seqs.push(row.try_get(2).map_err(backend)?);
                message_times_ms.push(row.try_get(3).map_err(backend)?);
            }
            let named: Option<String> = created.try_get(1).map_err(backend)?;
            let title = named.unwrap_or_else(|| first_user_title(&messages));
            let turns = turn_records(pool, id).await?;
            Ok(Some(ConversationDetail {
                id: id.to_owned(),
                created_at_ms: created.try_get(0).map_err(backend)?,
                title,
                messages,
                message_turns,
                message_seqs,
                message_times_ms,
                turns,
                settings: settings(
                    created
                        .try_get::<Option<String>, _>(2)
                        .map_err(backend)?
                        .as_deref(),
                )?,
                forked_from: created.try_get(3).map_err(backend)?,
                fork_before: fork_before(created.try_get(4).map_err(backend)?),
            }))
        })
    }

    fn rename_conversation<'a>(
        &'a self,
        id: &'a str,
        title: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let done = sqlx::query("UPDATE buddy_conversations SET title = $2 WHERE id = $1")
                .bind(id)
                .bind(title)
                .execute(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(done.rows_affected() > 0)
        })
    }

    fn set_settings<'a>(
        &'a self,
        id: &'a str,
        settings: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let done = sqlx::query("UPDATE buddy_conversations SET settings = $2 WHERE id = $1")
                .bind(id)
                .bind(settings.to_string())
                .execute(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(done.rows_affected() > 0)
        })
    }

    fn delete_conversation<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let gone: i64 = sqlx::query(DELETE_CONVERSATION)
                .bind(id)
                .fetch_one(&self.inner.pool)
                .await
                .and_then(|row| row.try_get(0))
                .map_err(backend)?;
            Ok(gone > 0)
        })
    }
}

/// A conversation's turn records, oldest first.
async fn turn_records(pool: &PgPool, id: &str) -> Result<Vec<TurnRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, model, started_at_ms, finished_at_ms, stop_reason, stats, error, hidden, response
         FROM buddy_turns WHERE conversation_id = $1 ORDER BY started_at_ms, id",
    )
    .bind(id)
    .fetch_all(pool)
    .await
    .map_err(backend)?;
    rows.iter()
        .map(|row| {
            let stats: Option<String> = row.try_get(5).map_err(backend)?;
            let response: Option<String> = row.try_get(8).map_err(backend)?;
            Ok(TurnRecord {
                id: row.try_get(0).map_err(backend)?,
                model: row.try_get(1).map_err(backend)?,
                started_at_ms: row.try_get(2).map_err(backend)?,
                finished_at_ms: row.try_get(3).map_err(backend)?,
                stop_reason: turn_end(row.try_get(4).map_err(backend)?)?,
                stats: stats.as_deref().map(decode).transpose()?,
                error: row.try_get(6).map_err(backend)?,
                hidden: row.try_get(7).map_err(backend)?,
                response: response.as_deref().map(decode).transpose()?,
            })
        })
        .collect()
}
