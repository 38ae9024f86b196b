//! A conversation's messages on SQLite, and the writes of messages that turns and forks
//! share.

use buddy_core::{BoxFuture, Message, TokenCount};
use rusqlite::{Connection, OptionalExtension, params};

use super::{SqliteStore, backend};
use crate::body::message_json;
use crate::columns::{count_columns, decode, nanos, now_ms, role, stored_count};
use crate::error::StoreError;
use crate::records::CountedHistory;
use crate::store::History;

impl SqliteStore {
    /// Appends messages in one transaction, each at its time in `times` (when it has
    /// one there) or at the time of the write.
    fn append_timed(
        &self,
        id: &str,
        turn_id: &str,
        messages: &[Message],
        counts: &[Option<TokenCount>],
        times: &[i64],
    ) -> BoxFuture<'static, Result<(), StoreError>> {
        let (id, turn_id) = (id.to_owned(), turn_id.to_owned());
        // Cheap clones (arguments are shared); the JSON is written on the store thread,
        // one message at a time, not by every turn at once.
        let messages = messages.to_vec();
        let counts = counts.to_vec();
        let times = times.to_vec();
        self.run(move |conn| {
            let now = now_ms();
            let tx = conn.transaction().map_err(backend)?;
            append_in(&tx, &id, &turn_id, &messages, &counts, &times, now)?;
            tx.commit().map_err(backend)
        })
    }
}

/// Message JSON longer than this is written into its row in pieces (and read back with
/// `CAST(body AS TEXT)`, since such a row holds it as a blob).
const INLINE_BODY_MAX: usize = 256 * 1024;

/// Messages with, beside each, its turn, number and time.
type Numbered = (Vec<Message>, Vec<String>, Vec<i64>, Vec<i64>);

pub(super) fn load_with_turns(conn: &Connection, id: &str) -> Result<Numbered, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT CAST(body AS TEXT), turn_id, seq, created_at_ms FROM messages WHERE conversation_id = ?1 ORDER BY seq",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map(params![id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get(2)?,
                r.get(3)?,
            ))
        })
        .map_err(backend)?;
    let (mut messages, mut turns, mut seqs, mut times) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for row in rows {
        let (body, turn, seq, time) = row.map_err(backend)?;
        messages.push(decode(&body)?);
        turns.push(turn);
        seqs.push(seq);
        times.push(time);
    }
    Ok((messages, turns, seqs, times))
}

fn load(conn: &Connection, id: &str) -> Result<CountedHistory, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT CAST(body AS TEXT), tokens, token_encoding FROM messages WHERE conversation_id = ?1 ORDER BY seq",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map(params![id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<i64>>(1)?,
                r.get::<_, Option<String>>(2)?,
            ))
        })
        .map_err(backend)?;
    let mut history = CountedHistory::default();
    for row in rows {
        let (body, tokens, encoding) = row.map_err(backend)?;
        history.messages.push(decode(&body)?);
        history.counts.push(stored_count(tokens, encoding));
    }
    Ok(history)
}

fn exists(conn: &Connection, id: &str) -> Result<bool, StoreError> {
    conn.query_row(
        "SELECT 1 FROM conversations WHERE id = ?1",
        params![id],
        |_| Ok(()),
    )
    .optional()
    .map(|r| r.is_some())
    .map_err(backend)
}

/// Appends `messages` inside `tx` and moves the conversation's time; `NotFound` when
/// there is no conversation `id`.
pub(super) fn append_in(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    turn_id: &str,
    messages: &[Message],
    counts: &[Option<TokenCount>],
    times: &[i64],
    now: i64,
) -> Result<(), StoreError> {
    let updated = tx
        .execute(
            "UPDATE conversations SET updated_at_ms = ?2 WHERE id = ?1",
            params![id, now],
        )
        .map_err(backend)?;
    if updated == 0 {
        return Err(StoreError::NotFound(id.to_owned()));
    }
    insert_messages(tx, id, turn_id, messages, counts, times, now)
}

/// Appends `messages` to conversation `id` inside `tx`, numbered after its last one,
/// each at its time in `times` (when it has one there) or at `now`.
pub(super) fn insert_messages(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    turn_id: &str,
    messages: &[Message],
    counts: &[Option<TokenCount>],
    times: &[i64],
    now: i64,
) -> Result<(), StoreError> {
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO messages (conversation_id, seq, turn_id, role, body, created_at_ms, tokens, token_encoding)
             VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE conversation_id = ?1), ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(backend)?;
    for (i, message) in messages.iter().enumerate() {
        let (tokens, encoding) = count_columns(counts.get(i));
        let at = times.get(i).copied().unwrap_or(now);
        let encode = |e: serde_json::Error| StoreError::Backend(e.to_string());
        let length = buddy_core::json_len(message).map_err(encode)?;
        if length <= INLINE_BODY_MAX {
            let body = message_json(message).map_err(encode)?;
            insert
                .execute(params![
                    id,
                    turn_id,
                    role(message),
                    body,
                    at,
                    tokens,
                    encoding
                ])
                .map_err(backend)?;
            continue;
        }
        // A long message (megabytes of tool-call arguments) is written into
        // its row piece by piece: never whole in memory, nor copied by SQLite.
        let length =
            i64::try_from(length).map_err(|_| StoreError::Backend("message too long".into()))?;
        tx.prepare_cached(
            "INSERT INTO messages (conversation_id, seq, turn_id, role, body, created_at_ms, tokens, token_encoding)
             VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE conversation_id = ?1), ?2, ?3, zeroblob(?4), ?5, ?6, ?7)",
        )
        .and_then(|mut long| long.execute(params![id, turn_id, role(message), length, at, tokens, encoding]))
        .map_err(backend)?;
        let mut blob = tx
            .blob_open(
                rusqlite::MAIN_DB,
                "messages",
                "body",
                tx.last_insert_rowid(),
                false,
            )
            .map_err(backend)?;
        let mut writer = std::io::BufWriter::with_capacity(64 * 1024, &mut blob);
        serde_json::to_writer(&mut writer, message).map_err(encode)?;
        std::io::Write::flush(&mut writer).map_err(|e| StoreError::Backend(e.to_string()))?;
    }
    Ok(())
}

/// Bytes of message JSON in `owner`'s conversations (`owner_bytes`).
fn bytes_of_owner(conn: &Connection, owner: &str) -> Result<u64, StoreError> {
    let bytes: i64 = conn
        .query_row(
            // One row, kept by the messages' triggers: with the quota on by default every
            // turn asks, and a key may hold a gigabyte in a million messages.
            "SELECT COALESCE((SELECT bytes FROM owner_bytes WHERE owner = ?1), 0)",
            params![owner],
            |r| r.get(0),
        )
        .map_err(backend)?;
    Ok(nanos(bytes))
}

impl History for SqliteStore {
    fn load_counted<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<CountedHistory, StoreError>> {
        let id = id.to_owned();
        self.run(move |conn| {
            if !exists(conn, &id)? {
                return Err(StoreError::NotFound(id));
            }
            load(conn, &id)
        })
    }

    fn append_counted<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        messages: &'a [Message],
        counts: &'a [Option<TokenCount>],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.append_timed(id, turn_id, messages, counts, &[])
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
        self.append_timed(id, turn_id, messages, counts, times_ms)
    }

    fn remove_messages<'a>(
        &'a self,
        conversation: &'a str,
        seqs: &'a [i64],
    ) -> BoxFuture<'a, Result<usize, StoreError>> {
        let (conversation, seqs) = (conversation.to_owned(), seqs.to_vec());
        self.run(move |conn| {
            let tx = conn.transaction().map_err(backend)?;
            let mut removed = 0;
            for seq in seqs {
                removed += tx
                    .execute(
                        "DELETE FROM messages WHERE conversation_id = ?1 AND seq = ?2",
                        params![conversation, seq],
                    )
                    .map_err(backend)?;
            }
            tx.commit().map_err(backend)?;
            Ok(removed)
        })
    }

    fn stored_bytes<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<u64, StoreError>> {
        let owner = owner.to_owned();
        self.run(move |conn| bytes_of_owner(conn, &owner))
    }
}
