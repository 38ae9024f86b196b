//! Conversations as records on SQLite.

use buddy_core::BoxFuture;
use rusqlite::{Connection, OptionalExtension, params};

use super::history::load_with_turns;
use super::{SqliteStore, backend};
use crate::columns::{
    decode, first_user_title, fork_before, listed_title, new_id, now_ms, settings, turn_end,
};
use crate::error::StoreError;
use crate::records::{ConversationDetail, ConversationInfo, ConversationSummary, TurnRecord};
use crate::store::Conversations;

impl Conversations for SqliteStore {
    fn create_conversation<'a>(
        &'a self,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        let owner = owner.to_owned();
        self.run(move |conn| {
            let id = new_id("conv");
            let now = now_ms();
            conn.execute(
                "INSERT INTO conversations (id, created_at_ms, updated_at_ms, owner) VALUES (?1, ?2, ?2, ?3)",
                params![id, now, owner],
            )
            .map_err(backend)?;
            Ok(id)
        })
    }

    fn session_conversation<'a>(
        &'a self,
        owner: &'a str,
        session: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        let (owner, session) = (owner.to_owned(), session.to_owned());
        self.run(move |conn| {
            conn.query_row(
                "SELECT id FROM conversations
                 WHERE owner = ?1 AND json_extract(settings, '$.metadata.buddy_session') = ?2
                 ORDER BY updated_at_ms DESC, rowid DESC LIMIT 1",
                params![owner, session],
                |r| r.get::<_, String>(0),
            )
            .optional()
            .map_err(backend)
        })
    }

    fn conversation_info<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConversationInfo>, StoreError>> {
        let id = id.to_owned();
        self.run(move |conn| {
            conn.query_row(
                "SELECT owner,
                    (SELECT model FROM turns t WHERE t.conversation_id = c.id ORDER BY started_at_ms DESC, rowid DESC LIMIT 1),
                    settings
                 FROM conversations c WHERE id = ?1",
                params![id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Option<String>>(1)?,
                        r.get::<_, Option<String>>(2)?,
                    ))
                },
            )
            .optional()
            .map_err(backend)?
            .map(|(owner, last_model, stored)| {
                Ok(ConversationInfo {
                    owner,
                    last_model,
                    settings: settings(stored.as_deref())?,
                })
            })
            .transpose()
        })
    }

    fn list_conversations<'a>(
        &'a self,
        owner: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<ConversationSummary>, StoreError>> {
        let owner = owner.map(str::to_owned);
        self.run(move |conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT c.id, c.created_at_ms, c.updated_at_ms,
                        (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id),
                        (SELECT CAST(body AS TEXT) FROM messages m WHERE m.conversation_id = c.id AND m.role = 'user' ORDER BY seq LIMIT 1),
                        (SELECT stop_reason FROM turns t WHERE t.conversation_id = c.id ORDER BY started_at_ms DESC LIMIT 1),
                        c.title, c.forked_from, c.fork_before
                     FROM conversations c WHERE ?1 IS NULL OR c.owner = ?1
                     ORDER BY c.updated_at_ms DESC",
                )
                .map_err(backend)?;
            let rows = stmt
                .query_map(params![owner], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, i64>(3)?,
                        // Read apart: one damaged row marks its conversation only.
                        r.get::<_, Option<String>>(4).map_err(backend),
                        r.get::<_, Option<String>>(5).map_err(backend),
                        r.get::<_, Option<String>>(6)?,
                        r.get::<_, Option<String>>(7)?,
                        r.get::<_, Option<i64>>(8)?,
                    ))
                })
                .map_err(backend)?;
            rows.map(|row| {
                let (id, created, updated, count, first_user, reason, named, from, before) =
                    row.map_err(backend)?;
                Ok(ConversationSummary {
                    id,
                    created_at_ms: created,
                    updated_at_ms: updated,
                    messages: u64::try_from(count).unwrap_or(0),
                    title: listed_title(named, first_user),
                    last_stop_reason: reason.and_then(turn_end).unwrap_or(None),
                    forked_from: from,
                    fork_before: fork_before(before),
                })
            })
            .collect()
        })
    }

    fn get_conversation<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConversationDetail>, StoreError>> {
        let id = id.to_owned();
        self.run(move |conn| {
            type Row = (i64, Option<String>, Option<String>, Option<String>, Option<i64>);
            let created: Option<Row> = conn
                .query_row(
                    "SELECT created_at_ms, title, settings, forked_from, fork_before FROM conversations WHERE id = ?1",
                    params![id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )
                .optional()
                .map_err(backend)?;
            let Some((created_at_ms, named, stored, forked_from, before)) = created else {
                return Ok(None);
            };
            let (messages, message_turns, message_seqs, message_times_ms) =
                load_with_turns(conn, &id)?;
            let title = match named {
                Some(named) => named,
                None => first_user_title(&messages),
            };
            let turns = turn_records(conn, &id)?;
            Ok(Some(ConversationDetail {
                id,
                created_at_ms,
                title,
                messages,
                message_turns,
                message_seqs,
                message_times_ms,
                turns,
                settings: settings(stored.as_deref())?,
                forked_from,
                fork_before: fork_before(before),
            }))
        })
    }

    fn rename_conversation<'a>(
        &'a self,
        id: &'a str,
        title: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let (id, title) = (id.to_owned(), title.to_owned());
        self.run(move |conn| {
            let n = conn
                .execute(
                    "UPDATE conversations SET title = ?2 WHERE id = ?1",
                    params![id, title],
                )
                .map_err(backend)?;
            Ok(n > 0)
        })
    }

    fn set_settings<'a>(
        &'a self,
        id: &'a str,
        settings: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let (id, text) = (id.to_owned(), settings.to_string());
        self.run(move |conn| {
            let n = conn
                .execute(
                    "UPDATE conversations SET settings = ?2 WHERE id = ?1",
                    params![id, text],
                )
                .map_err(backend)?;
            Ok(n > 0)
        })
    }

    fn delete_conversation<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        let id = id.to_owned();
        self.run(move |conn| {
            let n = conn
                .execute("DELETE FROM conversations WHERE id = ?1", params![id])
                .map_err(backend)?;
            Ok(n > 0)
        })
    }
}

/// A conversation's turn records, oldest first.
fn turn_records(conn: &Connection, id: &str) -> Result<Vec<TurnRecord>, StoreError> {
    let mut stmt = conn
        .prepare(
            "SELECT id, model, started_at_ms, finished_at_ms, stop_reason, stats, error, hidden, response
             FROM turns WHERE conversation_id = ?1 ORDER BY started_at_ms, rowid",
        )
        .map_err(backend)?;
    stmt.query_map(params![id], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, Option<i64>>(3)?,
            r.get::<_, Option<String>>(4)?,
            r.get::<_, Option<String>>(5)?,
            r.get::<_, Option<String>>(6)?,
            r.get::<_, bool>(7)?,
            r.get::<_, Option<String>>(8)?,
        ))
    })
    .map_err(backend)?
    .map(|row| {
        let (id, model, started, finished, reason, stats, error, hidden, response) =
            row.map_err(backend)?;
        Ok(TurnRecord {
            id,
            model,
            started_at_ms: started,
            finished_at_ms: finished,
            stop_reason: turn_end(reason)?,
            stats: stats.as_deref().map(decode).transpose()?,
            error,
            hidden,
            response: response.as_deref().map(decode).transpose()?,
        })
    })
    .collect()
}
