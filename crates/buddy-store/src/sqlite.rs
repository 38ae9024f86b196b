//! The embedded SQLite store.

use std::path::{Path, PathBuf};
use std::sync::mpsc;

use buddy_core::{BoxFuture, Message, RecordedTask, StopReason, TokenCount, TurnStats, Usd};
use rusqlite::{Connection, OptionalExtension, params};

use crate::body::message_json;
use crate::deletion::{self, Plan, TurnDeletion};
use crate::ledger;
use crate::store::{
    ConversationDetail, ConversationInfo, ConversationSummary, CountedHistory, ForkCopy, SpendHold,
    Store, StoreError, TurnClosing, TurnOpening, TurnRecord, count_columns, decode,
    first_user_title, listed_title, new_id, now_ms, role, runs, settings, stored_count, turn_end,
};

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
);
CREATE TABLE messages (
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    turn_id TEXT NOT NULL,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE TABLE turns (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    started_at_ms INTEGER NOT NULL,
    finished_at_ms INTEGER,
    stop_reason TEXT,
    stats TEXT,
    error TEXT
);
CREATE INDEX turns_by_conversation ON turns(conversation_id, started_at_ms);
"#,
    r#"
ALTER TABLE conversations ADD COLUMN owner TEXT NOT NULL DEFAULT 'anonymous';
CREATE INDEX conversations_by_owner ON conversations(owner, updated_at_ms);
"#,
    r#"
ALTER TABLE conversations ADD COLUMN title TEXT;
"#,
    r#"
ALTER TABLE turns ADD COLUMN tape TEXT;
"#,
    r#"
CREATE TABLE spend (
    owner TEXT NOT NULL,
    day TEXT NOT NULL,
    nanos INTEGER NOT NULL,
    PRIMARY KEY (owner, day)
);
"#,
    r#"
ALTER TABLE conversations ADD COLUMN settings TEXT;
"#,
    // Each message's token count and the counting it was made by (issue 30): a
    // continued conversation is not counted again.
    r#"
ALTER TABLE messages ADD COLUMN tokens INTEGER;
ALTER TABLE messages ADD COLUMN token_encoding TEXT;
"#,
    // A deleted response whose messages later turns build on is hidden, not removed.
    r#"
ALTER TABLE turns ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0;
"#,
    // A fork records where it came from, so a client can show it as a version of it.
    r#"
ALTER TABLE conversations ADD COLUMN forked_from TEXT;
ALTER TABLE conversations ADD COLUMN fork_before INTEGER;
"#,
    // What running turns hold of their key's spend room (issue 46): settled at the
    // turn's end; one a dead process left lapses at `expires_at_ms`.
    r#"
CREATE TABLE spend_holds (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    nanos INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL
);
CREATE INDEX spend_holds_by_owner ON spend_holds(owner);
"#,
    // The tasks tool calls became on their MCP servers (issue 48): a turn after a
    // restart waits on them again instead of answering the calls as interrupted.
    r#"
CREATE TABLE call_tasks (
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    call_id TEXT NOT NULL,
    server TEXT NOT NULL,
    task_id TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, call_id)
);
"#,
];

/// A job for the store's thread.
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// A conversation store in one SQLite file (WAL mode: every committed message
/// survives a process crash).
///
/// One thread owns the connection and runs the calls in order; callers await the
/// answer. Thousands of concurrent turns then queue their writes instead of filling
/// the runtime's blocking pool with threads.
#[derive(Clone)]
pub struct SqliteStore {
    jobs: mpsc::Sender<Job>,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (or creates) the database at `path`, creating its directory, applying
    /// migrations, and marking turns a previous process never finished as `interrupted`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        let fail = |e: &dyn std::fmt::Display| StoreError::Backend(format!("{shown}: {e}"));
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| fail(&e))?;
        }
        let conn = Connection::open(path).map_err(|e| fail(&e))?;
        Self::init(conn, path.to_owned()).map_err(|e| fail(&e))
    }

    /// Opens an existing database to read only (`buddy replay` beside a running server):
    /// no migration, no write; a database of another schema version is refused.
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        let fail = |e: &dyn std::fmt::Display| StoreError::Backend(format!("{shown}: {e}"));
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| fail(&e))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| fail(&e))?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| fail(&e))?;
        if usize::try_from(version).ok() != Some(MIGRATIONS.len()) {
            return Err(fail(&format!(
                "its schema is version {version}, this buddy reads version {}; run `buddy serve` on it once to bring it up to date",
                MIGRATIONS.len()
            )));
        }
        Self::spawn(conn, path.to_owned()).map_err(|e| fail(&e))
    }

    /// An in-memory store (tests, throwaway servers).
    pub fn in_memory() -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory().map_err(|e| StoreError::Backend(e.to_string()))?;
        Self::init(conn, PathBuf::from(":memory:")).map_err(|e| StoreError::Backend(e.to_string()))
    }

    fn init(conn: Connection, path: PathBuf) -> rusqlite::Result<Self> {
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        for (i, sql) in MIGRATIONS
            .iter()
            .enumerate()
            .skip(usize::try_from(version).unwrap_or(0))
        {
            conn.execute_batch(sql)?;
            conn.pragma_update(
                None,
                "user_version",
                i64::try_from(i + 1).unwrap_or(i64::MAX),
            )?;
        }
        conn.execute(
            "UPDATE turns SET stop_reason = 'interrupted', finished_at_ms = ?1 WHERE finished_at_ms IS NULL",
            params![now_ms()],
        )?;
        // Their turns were interrupted too: what they held is free again.
        conn.execute("DELETE FROM spend_holds", [])?;
        Self::spawn(conn, path)
    }

    /// Starts the thread that owns the connection.
    fn spawn(conn: Connection, path: PathBuf) -> rusqlite::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let mut conn = conn;
        std::thread::Builder::new()
            .name("buddy-store".into())
            // Ends when the last handle to the store is dropped.
            .spawn(move || {
                while let Ok(job) = queue.recv() {
                    job(&mut conn);
                }
            })
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        Ok(SqliteStore { jobs, path })
    }

    /// Runs `op` on the store's thread and awaits its answer.
    fn run<T: Send + 'static>(
        &self,
        op: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, StoreError>> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let sent = self.jobs.send(Box::new(move |conn: &mut Connection| {
            let _ = answer.send(op(conn));
        }));
        let path = self.path.display().to_string();
        Box::pin(async move {
            sent.map_err(|_| StoreError::Backend(format!("{path}: the store thread has stopped")))?;
            answered.await.map_err(|_| {
                StoreError::Backend(format!("{path}: the store thread stopped mid-call"))
            })?
        })
    }

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

/// A failed statement; a value that does not read as its type (invalid UTF-8, a wrong
/// column type) is a damaged record, not a failure a retry could mend.
fn backend(e: rusqlite::Error) -> StoreError {
    match e {
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::Utf8Error(..)
        | rusqlite::Error::InvalidColumnType(..) => StoreError::Corrupt(e.to_string()),
        e => StoreError::Backend(e.to_string()),
    }
}

/// Every message of a conversation with the turn that added it.
/// A conversation's messages, with the turn and the number (seq) of each.
/// Messages with, beside each, its turn, number and time.
type Numbered = (Vec<Message>, Vec<String>, Vec<i64>, Vec<i64>);

fn load_with_turns(conn: &Connection, id: &str) -> Result<Numbered, StoreError> {
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

/// Records how turn `?1` ended: at `?2`, stop reason, stats, error and tape.
const FINISH_TURN: &str = "UPDATE turns SET finished_at_ms = ?2, stop_reason = ?3, stats = ?4, error = ?5, tape = ?6 WHERE id = ?1";

/// Appends `messages` inside `tx` and moves the conversation's time; `NotFound` when
/// there is no conversation `id`.
fn append_in(
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
fn insert_messages(
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

impl Store for SqliteStore {
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

    fn open_turn<'a>(
        &'a self,
        opening: TurnOpening<'a>,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        let id = opening.conversation.map(str::to_owned);
        let owner = opening.owner.to_owned();
        let (turn_id, model) = (opening.turn.to_owned(), opening.model.to_owned());
        let settings = opening.settings.map(serde_json::Value::to_string);
        let messages = opening.messages.to_vec();
        let counts = opening.counts.to_vec();
        let copied = opening.copied.to_vec();
        let copied_turns = opening.copied_turns.to_vec();
        self.run(move |conn| {
            let now = now_ms();
            let tx = conn.transaction().map_err(backend)?;
            let id = match id {
                Some(id) => {
                    let updated = tx
                        .execute(
                            "UPDATE conversations SET updated_at_ms = ?2, settings = COALESCE(?3, settings) WHERE id = ?1",
                            params![id, now, settings],
                        )
                        .map_err(backend)?;
                    if updated == 0 {
                        return Err(StoreError::NotFound(id));
                    }
                    id
                }
                None => {
                    let id = new_id("conv");
                    tx.execute(
                        "INSERT INTO conversations (id, created_at_ms, updated_at_ms, owner, settings) VALUES (?1, ?2, ?2, ?3, ?4)",
                        params![id, now, owner, settings],
                    )
                    .map_err(backend)?;
                    id
                }
            };
            tx.execute(
                "INSERT INTO turns (id, conversation_id, model, started_at_ms) VALUES (?1, ?2, ?3, ?4)",
                params![turn_id, id, model, now],
            )
            .map_err(backend)?;
            for (turn, run) in runs(&copied, &copied_turns) {
                insert_messages(&tx, &id, turn, run, &[], &[], now)?;
            }
            insert_messages(&tx, &id, &turn_id, &messages, &counts, &[], now)?;
            tx.commit().map_err(backend)?;
            Ok(id)
        })
    }

    fn begin_turn<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        model: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (id, turn_id, model) = (id.to_owned(), turn_id.to_owned(), model.to_owned());
        self.run(move |conn| {
            conn.execute(
                "INSERT INTO turns (id, conversation_id, model, started_at_ms) VALUES (?1, ?2, ?3, ?4)",
                params![turn_id, id, model, now_ms()],
            )
            .map_err(backend)?;
            Ok(())
        })
    }

    fn finish_turn<'a>(
        &'a self,
        turn_id: &'a str,
        reason: StopReason,
        stats: &'a TurnStats,
        error: Option<&'a str>,
        tape: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let turn_id = turn_id.to_owned();
        let stats = serde_json::to_string(stats).unwrap_or_default();
        let error = error.map(str::to_owned);
        let tape = tape.map(str::to_owned);
        self.run(move |conn| {
            conn.execute(
                FINISH_TURN,
                params![turn_id, now_ms(), reason.as_str(), stats, error, tape],
            )
            .map_err(backend)?;
            Ok(())
        })
    }

    fn close_turn<'a>(&'a self, closing: TurnClosing<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        let (id, turn_id) = (closing.conversation.to_owned(), closing.turn.to_owned());
        let last = closing.last.clone();
        let reason = closing.reason.as_str();
        let stats = serde_json::to_string(closing.stats).unwrap_or_default();
        let error = closing.error.map(str::to_owned);
        let tape = closing.tape.map(str::to_owned);
        self.run(move |conn| {
            let now = now_ms();
            let tx = conn.transaction().map_err(backend)?;
            if !last.messages.is_empty() {
                append_in(
                    &tx,
                    &id,
                    &turn_id,
                    &last.messages,
                    &last.counts,
                    &last.times_ms,
                    now,
                )?;
            }
            tx.execute(
                FINISH_TURN,
                params![turn_id, now, reason, stats, error, tape],
            )
            .map_err(backend)?;
            tx.commit().map_err(backend)
        })
    }

    fn turn_tapes<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>> {
        let id = id.to_owned();
        self.run(move |conn| {
            let mut statement = conn
                .prepare_cached(
                    "SELECT id, tape FROM turns WHERE conversation_id = ?1 AND tape IS NOT NULL \
                     ORDER BY started_at_ms, rowid",
                )
                .map_err(backend)?;
            let rows = statement
                .query_map(params![id], |row| Ok((row.get(0)?, row.get(1)?)))
                .map_err(backend)?;
            rows.collect::<Result<Vec<(String, String)>, _>>()
                .map_err(backend)
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
                    fork_before: before.and_then(|n| u64::try_from(n).ok()),
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
            let Some((created_at_ms, named, stored, forked_from, fork_before)) = created else {
                return Ok(None);
            };
            let (messages, message_turns, message_seqs, message_times_ms) =
                load_with_turns(conn, &id)?;
            let title = match named {
                Some(named) => named,
                None => first_user_title(&messages),
            };
            let mut stmt = conn
                .prepare(
                    "SELECT id, model, started_at_ms, finished_at_ms, stop_reason, stats, error, hidden
                     FROM turns WHERE conversation_id = ?1 ORDER BY started_at_ms, rowid",
                )
                .map_err(backend)?;
            let turns = stmt
                .query_map(params![id], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, Option<i64>>(3)?,
                        r.get::<_, Option<String>>(4)?,
                        r.get::<_, Option<String>>(5)?,
                        r.get::<_, Option<String>>(6)?,
                        r.get::<_, bool>(7)?,
                    ))
                })
                .map_err(backend)?
                .map(|row| {
                    let (id, model, started, finished, reason, stats, error, hidden) =
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
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
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
                fork_before: fork_before.and_then(|n| u64::try_from(n).ok()),
            }))
        })
    }

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

    fn record_call_task<'a>(
        &'a self,
        id: &'a str,
        call_id: &'a str,
        task: &'a RecordedTask,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (id, call_id, task) = (id.to_owned(), call_id.to_owned(), task.clone());
        self.run(move |conn| {
            conn.execute(
                "INSERT OR REPLACE INTO call_tasks (conversation_id, call_id, server, task_id, created_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id, call_id, task.server, task.task_id, now_ms()],
            )
            .map_err(backend)?;
            Ok(())
        })
    }

    fn call_tasks<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<std::collections::HashMap<String, RecordedTask>, StoreError>> {
        let id = id.to_owned();
        self.run(move |conn| {
            let mut statement = conn
                .prepare(
                    "SELECT call_id, server, task_id FROM call_tasks WHERE conversation_id = ?1",
                )
                .map_err(backend)?;
            let rows = statement
                .query_map(params![id], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        RecordedTask {
                            server: row.get(1)?,
                            task_id: row.get(2)?,
                        },
                    ))
                })
                .map_err(backend)?;
            rows.collect::<Result<_, _>>().map_err(backend)
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

    fn delete_turn<'a>(
        &'a self,
        conversation: &'a str,
        turn: &'a str,
    ) -> BoxFuture<'a, Result<TurnDeletion, StoreError>> {
        let (conversation, turn) = (conversation.to_owned(), turn.to_owned());
        self.run(move |conn| {
            let tx = conn.transaction().map_err(backend)?;
            let turns = {
                let mut stmt = tx
                    .prepare(
                        "SELECT id, hidden FROM turns WHERE conversation_id = ?1
                         ORDER BY started_at_ms, rowid",
                    )
                    .map_err(backend)?;
                stmt.query_map(params![conversation], |r| Ok((r.get(0)?, r.get(1)?)))
                    .map_err(backend)?
                    .collect::<Result<Vec<(String, bool)>, _>>()
                    .map_err(backend)?
            };
            let plan = deletion::plan(&turns, &turn);
            match &plan {
                Plan::NotFound => {}
                Plan::Hide => {
                    tx.execute("UPDATE turns SET hidden = 1 WHERE id = ?1", params![turn])
                        .map_err(backend)?;
                }
                Plan::Remove {
                    conversation: true, ..
                } => {
                    tx.execute(
                        "DELETE FROM conversations WHERE id = ?1",
                        params![conversation],
                    )
                    .map_err(backend)?;
                }
                Plan::Remove { turns, .. } => {
                    for id in turns {
                        tx.execute(
                            "DELETE FROM messages WHERE conversation_id = ?1 AND turn_id = ?2",
                            params![conversation, id],
                        )
                        .map_err(backend)?;
                        tx.execute("DELETE FROM turns WHERE id = ?1", params![id])
                            .map_err(backend)?;
                    }
                }
            }
            tx.commit().map_err(backend)?;
            Ok(plan.outcome())
        })
    }

    fn add_spend<'a>(
        &'a self,
        owner: &'a str,
        day: &'a str,
        amount: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (owner, day) = (owner.to_owned(), day.to_owned());
        let nanos = i64::try_from(amount.nanos()).unwrap_or(i64::MAX);
        self.run(move |conn| {
            conn.execute(
                "INSERT INTO spend (owner, day, nanos) VALUES (?1, ?2, ?3)
                 ON CONFLICT (owner, day) DO UPDATE SET nanos = nanos + excluded.nanos",
                params![owner, day, nanos],
            )
            .map_err(backend)?;
            Ok(())
        })
    }

    fn spend_since<'a>(
        &'a self,
        owner: &'a str,
        first_day: &'a str,
    ) -> BoxFuture<'a, Result<Usd, StoreError>> {
        let (owner, first_day) = (owner.to_owned(), first_day.to_owned());
        self.run(move |conn| {
            let nanos: i64 = conn
                .query_row(
                    "SELECT COALESCE(SUM(nanos), 0) FROM spend WHERE owner = ?1 AND day >= ?2",
                    params![owner, first_day],
                    |r| r.get(0),
                )
                .map_err(backend)?;
            Ok(Usd::from_nanos(u64::try_from(nanos).unwrap_or(0)))
        })
    }

    fn hold_spend<'a>(&'a self, hold: SpendHold<'a>) -> BoxFuture<'a, Result<Usd, StoreError>> {
        let hold = ledger::Hold::from(hold);
        self.run(move |conn| ledger::hold(conn, &hold))
    }

    fn settle_spend<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        day: &'a str,
        cost: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (owner, id, day) = (owner.to_owned(), id.to_owned(), day.to_owned());
        self.run(move |conn| ledger::settle(conn, &owner, &id, &day, cost))
    }

    fn stored_bytes<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<u64, StoreError>> {
        let owner = owner.to_owned();
        self.run(move |conn| ledger::stored_bytes(conn, &owner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TurnEnd;
    use buddy_core::ToolCall;

    #[tokio::test]
    async fn spend_adds_up_per_owner_and_day_and_outlives_conversations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("buddy.db");
        let store = SqliteStore::open(&path).unwrap();
        let cents = |n: u64| Usd::from_nanos(n * 10_000_000);
        store.add_spend("a", "2026-10-31", cents(5)).await.unwrap();
        store.add_spend("a", "2026-11-01", cents(2)).await.unwrap();
        store.add_spend("a", "2026-11-01", cents(3)).await.unwrap();
        store.add_spend("b", "2026-11-01", cents(7)).await.unwrap();
        assert_eq!(
            store.spend_since("a", "2026-11-01").await.unwrap(),
            cents(5)
        );
        assert_eq!(
            store.spend_since("a", "2026-10-01").await.unwrap(),
            cents(10)
        );
        assert_eq!(
            store.spend_since("c", "2026-10-01").await.unwrap(),
            Usd::ZERO
        );
        drop(store);
        let reopened = SqliteStore::open(&path).unwrap();
        assert_eq!(
            reopened.spend_since("b", "2026-11-01").await.unwrap(),
            cents(7)
        );
    }

    #[tokio::test]
    async fn a_conversation_round_trips_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/buddy.db");
        let store = SqliteStore::open(&path).unwrap();
        let id = store.create_conversation("owner-a").await.unwrap();
        store.begin_turn(&id, "turn_1", "m").await.unwrap();
        let messages = vec![
            Message::user("time?"),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall::new("c1", "get_time", "{}")],
            },
            Message::tool_result("c1", "12:00", false),
            Message::assistant("It is noon."),
        ];
        for m in &messages {
            store.append_message(&id, "turn_1", m).await.unwrap();
        }
        let stats = TurnStats {
            model_calls: 2,
            tool_calls: 1,
            ..TurnStats::default()
        };
        store
            .finish_turn("turn_1", StopReason::Completed, &stats, None, None)
            .await
            .unwrap();
        store.begin_turn(&id, "turn_2", "m").await.unwrap();
        drop(store);

        let reopened = SqliteStore::open(&path).unwrap();
        assert_eq!(reopened.load_messages(&id).await.unwrap(), messages);
        let detail = reopened.get_conversation(&id).await.unwrap().unwrap();
        assert_eq!(
            detail.turns[0].stop_reason.map(TurnEnd::as_str),
            Some("completed")
        );
        assert_eq!(detail.turns[0].stats, Some(stats));
        assert_eq!(
            detail.turns[1].stop_reason.map(TurnEnd::as_str),
            Some("interrupted"),
            "an unfinished turn after a restart"
        );
        let list = reopened.list_conversations(Some("owner-a")).await.unwrap();
        assert_eq!((list[0].messages, list[0].title.as_str()), (4, "time?"));
        assert!(
            reopened
                .list_conversations(Some("owner-b"))
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(reopened.list_conversations(None).await.unwrap().len(), 1);
        let info = reopened.conversation_info(&id).await.unwrap().unwrap();
        assert_eq!(
            (info.owner.as_str(), info.last_model.as_deref()),
            ("owner-a", Some("m"))
        );
        assert!(reopened.delete_conversation(&id).await.unwrap());
        assert!(!reopened.delete_conversation(&id).await.unwrap());
        assert!(matches!(
            reopened.load_messages(&id).await,
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            reopened.append_message(&id, "t", &Message::user("x")).await,
            Err(StoreError::NotFound(_))
        ));
    }
}
