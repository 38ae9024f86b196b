//! The PostgreSQL store, for several `buddy serve` instances that behave as one server:
//! conversations, turns and the running-turn registry live in the database, and cancels
//! travel between instances with LISTEN/NOTIFY.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use buddy_core::{BoxFuture, Message, StopReason, TokenCount, TurnStats, Usd};
use sqlx::Row;
use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use tokio::sync::mpsc;

use crate::body::message_json;
use crate::coordinate::{Claim, ClaimError, Coordinator, StoredEvent, StoredEvents};
use crate::store::{
    ConversationDetail, ConversationInfo, ConversationSummary, CountedHistory, Store, StoreError,
    TurnClosing, TurnOpening, TurnRecord, count_columns, decode, first_user_title, new_id, now_ms,
    role, settings, stored_count, title, turn_end,
};

/// The schema; every statement is idempotent, and instances starting together take
/// turns (an advisory lock) to apply it.
const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS buddy_conversations (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS buddy_conversations_by_owner ON buddy_conversations(owner, updated_at_ms);
ALTER TABLE buddy_conversations ADD COLUMN IF NOT EXISTS title TEXT;
ALTER TABLE buddy_conversations ADD COLUMN IF NOT EXISTS settings TEXT;
-- The conversation's last message number: an append takes its numbers from this row
-- (which it locks), so a round goes in as one statement. Filled in for older databases.
ALTER TABLE buddy_conversations ADD COLUMN IF NOT EXISTS last_seq BIGINT;
CREATE TABLE IF NOT EXISTS buddy_messages (
    conversation_id TEXT NOT NULL REFERENCES buddy_conversations(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    turn_id TEXT NOT NULL,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
-- Each message's token count and the counting it was made by: a continued
-- conversation is not counted again.
ALTER TABLE buddy_messages ADD COLUMN IF NOT EXISTS tokens BIGINT;
ALTER TABLE buddy_messages ADD COLUMN IF NOT EXISTS token_encoding TEXT;
UPDATE buddy_conversations c
    SET last_seq = (SELECT COALESCE(MAX(seq), 0) FROM buddy_messages m WHERE m.conversation_id = c.id)
    WHERE last_seq IS NULL;
ALTER TABLE buddy_conversations ALTER COLUMN last_seq SET DEFAULT 0;
ALTER TABLE buddy_conversations ALTER COLUMN last_seq SET NOT NULL;
CREATE TABLE IF NOT EXISTS buddy_turns (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES buddy_conversations(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    instance TEXT NOT NULL,
    started_at_ms BIGINT NOT NULL,
    finished_at_ms BIGINT,
    stop_reason TEXT,
    stats TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS buddy_turns_by_conversation ON buddy_turns(conversation_id, started_at_ms);
ALTER TABLE buddy_turns ADD COLUMN IF NOT EXISTS tape TEXT;
CREATE TABLE IF NOT EXISTS buddy_instances (
    id TEXT PRIMARY KEY,
    last_seen_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS buddy_running_turns (
    turn_id TEXT PRIMARY KEY,
    conversation_id TEXT UNIQUE,
    owner TEXT NOT NULL,
    instance TEXT NOT NULL,
    started_at_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS buddy_owner_turns (
    owner TEXT PRIMARY KEY,
    running BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS buddy_turn_logs (
    log_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    started_at_ms BIGINT NOT NULL,
    ended_at_ms BIGINT
);
CREATE TABLE IF NOT EXISTS buddy_turn_events (
    log_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    name TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (log_id, seq)
);
CREATE TABLE IF NOT EXISTS buddy_spend (
    owner TEXT NOT NULL,
    day TEXT NOT NULL,
    nanos BIGINT NOT NULL,
    PRIMARY KEY (owner, day)
);
"#;

/// The end of every append: the messages (`$4`–`$7`, with the conversation `$1`, the
/// time `$2` and the turn `$3`) numbered after `conv.base`, and that base sent back (no
/// row back: no such conversation).
macro_rules! add_messages {
    () => {
        ", added AS (
    INSERT INTO buddy_messages (conversation_id, seq, turn_id, role, body, created_at_ms, tokens, token_encoding)
    SELECT $1, conv.base + m.n, $3, m.role, m.body, $2, m.tokens, m.encoding
    FROM conv, UNNEST($4::TEXT[], $5::TEXT[], $6::BIGINT[], $7::TEXT[])
        WITH ORDINALITY AS m(role, body, tokens, encoding, n)
)
SELECT base FROM conv"
    };
}

/// The conversation `$1`'s row, locked, moved to time `$2`, with room for the messages
/// `$4`: `conv.base` is the number before the first of them.
macro_rules! lock_conversation {
    () => {
        "WITH conv AS (
    UPDATE buddy_conversations SET updated_at_ms = $2, last_seq = last_seq + cardinality($4::TEXT[])
    WHERE id = $1
    RETURNING last_seq - cardinality($4::TEXT[]) AS base
)"
    };
}

/// The turn's record (`$8` the model, `$9` the instance), in an opening.
macro_rules! add_turn {
    () => {
        ", turn AS (
    INSERT INTO buddy_turns (id, conversation_id, model, instance, started_at_ms)
    SELECT $3, $1, $8, $9, $2 FROM conv
)"
    };
}

/// The channel cancel requests travel on.
const CANCEL_CHANNEL: &str = "buddy_cancel";
/// How often an instance says it is alive.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// An instance silent for this long is gone: its unfinished turns are `interrupted`
/// and its claims released.
const STALE_MS: i64 = 30_000;

/// A conversation store and turn coordinator on PostgreSQL.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    /// This process's id among the instances sharing the database.
    instance: String,
    cancels: Mutex<Option<mpsc::UnboundedSender<String>>>,
}

fn backend(e: sqlx::Error) -> StoreError {
    StoreError::Backend(format!("postgres: {e}"))
}

/// A pool of at most `connections` to `url`; an error says what to check.
async fn pool(url: &str, connections: u32) -> Result<PgPool, StoreError> {
    PgPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect(url)
        .await
        .map_err(|e| {
            StoreError::Backend(format!(
                "cannot connect to PostgreSQL ({e}); check `store` (postgres://user:password@host:port/database) and that the server runs"
            ))
        })
}

impl PgStore {
    /// Connects to `url` (`postgres://user:password@host:port/db`), applies the schema,
    /// registers this instance, and starts its heartbeat and cancel listener.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let pool = pool(url, 16).await?;
        let mut tx = pool.begin().await.map_err(backend)?;
        sqlx::query("SELECT pg_advisory_xact_lock(7271001)")
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        sqlx::raw_sql(SCHEMA)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        let instance = new_id("inst");
        let inner = Arc::new(Inner {
            pool,
            instance,
            cancels: Mutex::new(None),
        });
        inner.heartbeat().await?;
        inner.sweep().await?;
        let weak = Arc::downgrade(&inner);
        tokio::spawn(heartbeats(weak.clone()));
        let mut listener = PgListener::connect_with(&inner.pool)
            .await
            .map_err(backend)?;
        listener.listen(CANCEL_CHANNEL).await.map_err(backend)?;
        tokio::spawn(listen(listener, weak));
        Ok(PgStore { inner })
    }

    /// Connects to `url` to read only (`buddy replay` beside running servers): no schema
    /// change, no instance registered, nothing written.
    pub async fn connect_reader(url: &str) -> Result<Self, StoreError> {
        let pool = pool(url, 4).await?;
        Ok(PgStore {
            inner: Arc::new(Inner {
                pool,
                instance: "reader".to_owned(),
                cancels: Mutex::new(None),
            }),
        })
    }

    /// This instance's id (turns record which instance ran them).
    pub fn instance(&self) -> &str {
        &self.inner.instance
    }
}

impl Inner {
    async fn heartbeat(&self) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO buddy_instances (id, last_seen_ms) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET last_seen_ms = EXCLUDED.last_seen_ms",
        )
        .bind(&self.instance)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(backend)?;
        Ok(())
    }

    /// Turns and claims of instances that stopped without saying so (a crash).
    async fn sweep(&self) -> Result<(), StoreError> {
        let now = now_ms();
        sqlx::query(
            "UPDATE buddy_turns SET stop_reason = 'interrupted', finished_at_ms = $2
             WHERE finished_at_ms IS NULL AND instance NOT IN (SELECT id FROM buddy_instances WHERE last_seen_ms > $1)",
        )
        .bind(now - STALE_MS)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(backend)?;
        sqlx::query(
            "DELETE FROM buddy_running_turns WHERE instance NOT IN (SELECT id FROM buddy_instances WHERE last_seen_ms > $1)",
        )
        .bind(now - STALE_MS)
        .execute(&self.pool)
        .await
        .map_err(backend)?;
        sqlx::query(
            "UPDATE buddy_owner_turns o SET running = (SELECT COUNT(*) FROM buddy_running_turns r WHERE r.owner = o.owner)
             WHERE running <> (SELECT COUNT(*) FROM buddy_running_turns r WHERE r.owner = o.owner)",
        )
        .execute(&self.pool)
        .await
        .map_err(backend)?;
        sqlx::query("DELETE FROM buddy_instances WHERE last_seen_ms <= $1")
            .bind(now - 10 * STALE_MS)
            .execute(&self.pool)
            .await
            .map_err(backend)?;
        Ok(())
    }
}

async fn heartbeats(inner: Weak<Inner>) {
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        let Some(inner) = inner.upgrade() else { return };
        if let Err(e) = inner.heartbeat().await {
            tracing::warn!(error = %e, "instance heartbeat failed");
        } else if let Err(e) = inner.sweep().await {
            tracing::warn!(error = %e, "sweep of stopped instances failed");
        }
    }
}

async fn listen(mut listener: PgListener, inner: Weak<Inner>) {
    loop {
        // `recv` reconnects by itself after a lost connection.
        let notification = listener.recv().await;
        let Some(inner) = inner.upgrade() else { return };
        match notification {
            Ok(n) => {
                if let Ok(cancels) = inner.cancels.lock()
                    && let Some(tx) = cancels.as_ref()
                {
                    let _ = tx.send(n.payload().to_owned());
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cancel listener failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

impl Store for PgStore {
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

    fn load_counted<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<CountedHistory, StoreError>> {
        Box::pin(async move {
            let exists = sqlx::query("SELECT 1 FROM buddy_conversations WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.inner.pool)
                .await
                .map_err(backend)?;
            if exists.is_none() {
                return Err(StoreError::NotFound(id.to_owned()));
            }
            load(&self.inner.pool, id).await
        })
    }

    fn append_counted<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        messages: &'a [Message],
        counts: &'a [Option<TokenCount>],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let columns = MessageColumns::of(messages, counts)?;
            let done = sqlx::query(APPEND_MESSAGES)
                .bind(id)
                .bind(now_ms())
                .bind(turn_id)
                .bind(&columns.roles)
                .bind(&columns.bodies)
                .bind(&columns.tokens)
                .bind(&columns.encodings)
                .fetch_optional(&self.inner.pool)
                .await
                .map_err(backend)?;
            match done {
                Some(_) => Ok(()),
                None => Err(StoreError::NotFound(id.to_owned())),
            }
        })
    }

    fn open_turn<'a>(
        &'a self,
        opening: TurnOpening<'a>,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(async move {
            let columns = MessageColumns::of(opening.messages, opening.counts)?;
            let (id, sql) = match opening.conversation {
                Some(id) => (id.to_owned(), OPEN_TURN),
                None => (new_id("conv"), OPEN_CONVERSATION),
            };
            let query = sqlx::query(sql)
                .bind(&id)
                .bind(now_ms())
                .bind(opening.turn)
                .bind(&columns.roles)
                .bind(&columns.bodies)
                .bind(&columns.tokens)
                .bind(&columns.encodings)
                .bind(opening.model)
                .bind(&self.inner.instance)
                .bind(opening.settings.map(serde_json::Value::to_string));
            let query = match opening.conversation {
                Some(_) => query,
                None => query.bind(opening.owner),
            };
            let done = query
                .fetch_optional(&self.inner.pool)
                .await
                .map_err(backend)?;
            match done {
                Some(_) => Ok(id),
                None => Err(StoreError::NotFound(id)),
            }
        })
    }

    fn begin_turn<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        model: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO buddy_turns (id, conversation_id, model, instance, started_at_ms) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(turn_id)
            .bind(id)
            .bind(model)
            .bind(&self.inner.instance)
            .bind(now_ms())
            .execute(&self.inner.pool)
            .await
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
        Box::pin(async move {
            let stats = serde_json::to_string(stats).unwrap_or_default();
            sqlx::query(
                "UPDATE buddy_turns SET finished_at_ms = $2, stop_reason = $3, stats = $4, error = $5, tape = $6 WHERE id = $1",
            )
            .bind(turn_id)
            .bind(now_ms())
            .bind(reason.as_str())
            .bind(stats)
            .bind(error)
            .bind(tape)
            .execute(&self.inner.pool)
            .await
            .map_err(backend)?;
            Ok(())
        })
    }

    fn close_turn<'a>(&'a self, closing: TurnClosing<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if closing.last.messages.is_empty() {
                return self
                    .finish_turn(
                        closing.turn,
                        closing.reason,
                        closing.stats,
                        closing.error,
                        closing.tape,
                    )
                    .await;
            }
            let columns = MessageColumns::of(&closing.last.messages, &closing.last.counts)?;
            let done = sqlx::query(CLOSE_TURN)
                .bind(closing.conversation)
                .bind(now_ms())
                .bind(closing.turn)
                .bind(&columns.roles)
                .bind(&columns.bodies)
                .bind(&columns.tokens)
                .bind(&columns.encodings)
                .bind(closing.reason.as_str())
                .bind(serde_json::to_string(closing.stats).unwrap_or_default())
                .bind(closing.error)
                .bind(closing.tape)
                .fetch_optional(&self.inner.pool)
                .await
                .map_err(backend)?;
            match done {
                Some(_) => Ok(()),
                None => Err(StoreError::NotFound(closing.conversation.to_owned())),
            }
        })
    }

    fn turn_tapes<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT id, tape FROM buddy_turns WHERE conversation_id = $1 AND tape IS NOT NULL \
                 ORDER BY started_at_ms, id",
            )
            .bind(id)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(backend)?;
            rows.iter()
                .map(|row| {
                    Ok((
                        row.try_get("id").map_err(backend)?,
                        row.try_get("tape").map_err(backend)?,
                    ))
                })
                .collect()
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
                    c.title
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
                    let first_user: Option<String> = row.try_get(4).map_err(backend)?;
                    let named: Option<String> = row.try_get(6).map_err(backend)?;
                    let title = match named {
                        Some(named) => named,
                        None => title(first_user.as_deref())?,
                    };
                    Ok(ConversationSummary {
                        id: row.try_get(0).map_err(backend)?,
                        created_at_ms: row.try_get(1).map_err(backend)?,
                        updated_at_ms: row.try_get(2).map_err(backend)?,
                        messages: u64::try_from(count).unwrap_or(0),
                        title,
                        last_stop_reason: turn_end(row.try_get(5).map_err(backend)?)?,
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
                "SELECT created_at_ms, title, settings FROM buddy_conversations WHERE id = $1",
            )
            .bind(id)
            .fetch_optional(pool)
            .await
            .map_err(backend)?;
            let Some(created) = created else {
                return Ok(None);
            };
            let rows = sqlx::query(
                "SELECT body, turn_id FROM buddy_messages WHERE conversation_id = $1 ORDER BY seq",
            )
            .bind(id)
            .fetch_all(pool)
            .await
            .map_err(backend)?;
            let mut messages = Vec::with_capacity(rows.len());
            let mut message_turns = Vec::with_capacity(rows.len());
            for row in &rows {
                let body: String = row.try_get(0).map_err(backend)?;
                messages.push(decode::<Message>(&body)?);
                message_turns.push(row.try_get(1).map_err(backend)?);
            }
            let named: Option<String> = created.try_get(1).map_err(backend)?;
            let title = named.unwrap_or_else(|| first_user_title(&messages));
            let rows = sqlx::query(
                "SELECT id, model, started_at_ms, finished_at_ms, stop_reason, stats, error
                 FROM buddy_turns WHERE conversation_id = $1 ORDER BY started_at_ms, id",
            )
            .bind(id)
            .fetch_all(pool)
            .await
            .map_err(backend)?;
            let turns = rows
                .iter()
                .map(|row| {
                    let stats: Option<String> = row.try_get(5).map_err(backend)?;
                    Ok(TurnRecord {
                        id: row.try_get(0).map_err(backend)?,
                        model: row.try_get(1).map_err(backend)?,
                        started_at_ms: row.try_get(2).map_err(backend)?,
                        finished_at_ms: row.try_get(3).map_err(backend)?,
                        stop_reason: turn_end(row.try_get(4).map_err(backend)?)?,
                        stats: stats.as_deref().map(decode).transpose()?,
                        error: row.try_get(6).map_err(backend)?,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok(Some(ConversationDetail {
                id: id.to_owned(),
                created_at_ms: created.try_get(0).map_err(backend)?,
                title,
                messages,
                message_turns,
                turns,
                settings: settings(
                    created
                        .try_get::<Option<String>, _>(2)
                        .map_err(backend)?
                        .as_deref(),
                )?,
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
            let done = sqlx::query("DELETE FROM buddy_conversations WHERE id = $1")
                .bind(id)
                .execute(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(done.rows_affected() > 0)
        })
    }

    fn add_spend<'a>(
        &'a self,
        owner: &'a str,
        day: &'a str,
        amount: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO buddy_spend (owner, day, nanos) VALUES ($1, $2, $3)
                 ON CONFLICT (owner, day) DO UPDATE SET nanos = buddy_spend.nanos + excluded.nanos",
            )
            .bind(owner)
            .bind(day)
            .bind(i64::try_from(amount.nanos()).unwrap_or(i64::MAX))
            .execute(&self.inner.pool)
            .await
            .map_err(backend)?;
            Ok(())
        })
    }

    fn spend_since<'a>(
        &'a self,
        owner: &'a str,
        first_day: &'a str,
    ) -> BoxFuture<'a, Result<Usd, StoreError>> {
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT COALESCE(SUM(nanos), 0)::BIGINT FROM buddy_spend WHERE owner = $1 AND day >= $2",
            )
            .bind(owner)
            .bind(first_day)
            .fetch_one(&self.inner.pool)
            .await
            .map_err(backend)?;
            let nanos: i64 = row.try_get(0).map_err(backend)?;
            Ok(Usd::from_nanos(u64::try_from(nanos).unwrap_or(0)))
        })
    }
}

async fn load(pool: &PgPool, id: &str) -> Result<CountedHistory, StoreError> {
    let rows = sqlx::query(
        "SELECT body, tokens, token_encoding FROM buddy_messages WHERE conversation_id = $1 ORDER BY seq",
    )
    .bind(id)
    .fetch_all(pool)
    .await
    .map_err(backend)?;
    let mut history = CountedHistory::default();
    for row in &rows {
        let body: String = row.try_get(0).map_err(backend)?;
        history.messages.push(decode(&body)?);
        history.counts.push(stored_count(
            row.try_get(1).map_err(backend)?,
            row.try_get(2).map_err(backend)?,
        ));
    }
    Ok(history)
}

/// A round's messages in one statement (one round trip, atomic by itself): the
/// conversation's row is locked and its `last_seq` moved past them, which numbers them
/// in order even when two appends race; no row back means no such conversation.
const APPEND_MESSAGES: &str = concat!(lock_conversation!(), add_messages!());

/// A turn's last messages and its end in one statement (`$8`–`$11`: stop reason, stats,
/// error, tape); the end is recorded only with the messages.
const CLOSE_TURN: &str = concat!(
    lock_conversation!(),
    ", finish AS (
    UPDATE buddy_turns SET finished_at_ms = $2, stop_reason = $8, stats = $9, error = $10, tape = $11
    WHERE id = $3 AND EXISTS (SELECT 1 FROM conv)
)",
    add_messages!()
);

/// A batch of messages as the column arrays the appends `UNNEST`.
struct MessageColumns<'m> {
    roles: Vec<&'static str>,
    bodies: Vec<String>,
    tokens: Vec<Option<i64>>,
    encodings: Vec<Option<&'m str>>,
}

impl<'m> MessageColumns<'m> {
    fn of(messages: &[Message], counts: &'m [Option<TokenCount>]) -> Result<Self, StoreError> {
        let mut columns = MessageColumns {
            roles: Vec::with_capacity(messages.len()),
            bodies: Vec::with_capacity(messages.len()),
            tokens: Vec::with_capacity(messages.len()),
            encodings: Vec::with_capacity(messages.len()),
        };
        for (i, message) in messages.iter().enumerate() {
            columns.roles.push(role(message));
            columns
                .bodies
                .push(message_json(message).map_err(|e| StoreError::Backend(e.to_string()))?);
            let (count, encoding) = count_columns(counts.get(i));
            columns.tokens.push(count);
            columns.encodings.push(encoding);
        }
        Ok(columns)
    }
}

/// A turn's opening on an existing conversation in one statement: the conversation's row
/// (locked, its settings replaced by `$10` when given), the turn's record and its first
/// messages, numbered as `APPEND_MESSAGES` numbers them.
const OPEN_TURN: &str = concat!(
    "WITH conv AS (
    UPDATE buddy_conversations SET updated_at_ms = $2, last_seq = last_seq + cardinality($4::TEXT[]),
        settings = COALESCE($10, settings)
    WHERE id = $1
    RETURNING last_seq - cardinality($4::TEXT[]) AS base
)",
    add_turn!(),
    add_messages!()
);

/// A turn's opening on a new conversation of owner `$11` in one statement: the
/// conversation, the turn's record and its first messages.
const OPEN_CONVERSATION: &str = concat!(
    "WITH conv AS (
    INSERT INTO buddy_conversations (id, owner, created_at_ms, updated_at_ms, settings, last_seq)
    VALUES ($1, $11, $2, $2, $10, cardinality($4::TEXT[]))
    RETURNING 0::BIGINT AS base
)",
    add_turn!(),
    add_messages!()
);

/// A claim in one statement: the owner's counter goes up only while under the cap (its
/// row is locked just for this statement), and the running-turn row goes in with it; a
/// conversation already running makes the whole statement fail, counter included.
const CLAIM: &str = "
WITH slot AS (
    INSERT INTO buddy_owner_turns (owner, running) VALUES ($3, 1)
    ON CONFLICT (owner) DO UPDATE SET running = buddy_owner_turns.running + 1
    WHERE buddy_owner_turns.running < $6
    RETURNING running
)
INSERT INTO buddy_running_turns (turn_id, conversation_id, owner, instance, started_at_ms)
SELECT $1, $2, $3, $4, $5 FROM slot
RETURNING turn_id";

/// Postgres's code for a unique-key violation.
const UNIQUE_VIOLATION: &str = "23505";

async fn claim_once(pool: &PgPool, claim: &Claim, instance: &str) -> Result<(), ClaimError> {
    let max = i64::try_from(claim.max_per_owner).unwrap_or(i64::MAX);
    let inserted = sqlx::query(CLAIM)
        .bind(&claim.turn_id)
        .bind(&claim.conversation_id)
        .bind(&claim.owner)
        .bind(instance)
        .bind(now_ms())
        .bind(max)
        .fetch_optional(pool)
        .await;
    match inserted {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(ClaimError::OwnerAtCap {
            max: claim.max_per_owner,
        }),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some(UNIQUE_VIOLATION) => {
            let conversation = claim.conversation_id.clone().unwrap_or_default();
            let running =
                sqlx::query("SELECT turn_id FROM buddy_running_turns WHERE conversation_id = $1")
                    .bind(&conversation)
                    .fetch_optional(pool)
                    .await
                    .map_err(backend)?
                    .and_then(|row| row.try_get::<String, _>(0).ok())
                    .unwrap_or_else(|| "another turn".into());
            Err(ClaimError::ConversationBusy {
                conversation,
                running,
            })
        }
        Err(e) => Err(backend(e).into()),
    }
}

impl Coordinator for PgStore {
    fn claim<'a>(&'a self, claim: &'a Claim) -> BoxFuture<'a, Result<(), ClaimError>> {
        Box::pin(claim_once(&self.inner.pool, claim, &self.inner.instance))
    }

    fn release<'a>(&'a self, turn_id: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            sqlx::query(
                "WITH gone AS (DELETE FROM buddy_running_turns WHERE turn_id = $1 RETURNING owner)
                 UPDATE buddy_owner_turns SET running = running - 1 WHERE owner IN (SELECT owner FROM gone)",
            )
                .bind(turn_id)
                .execute(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn running_on<'a>(
        &'a self,
        conversation_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(async move {
            let row =
                sqlx::query("SELECT turn_id FROM buddy_running_turns WHERE conversation_id = $1")
                    .bind(conversation_id)
                    .fetch_optional(&self.inner.pool)
                    .await
                    .map_err(backend)?;
            row.map(|r| r.try_get(0).map_err(backend)).transpose()
        })
    }

    fn request_cancel<'a>(
        &'a self,
        turn_id: &'a str,
        owner: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let found = sqlx::query(
                "SELECT 1 FROM buddy_running_turns WHERE turn_id = $1 AND ($2::TEXT IS NULL OR owner = $2)",
            )
            .bind(turn_id)
            .bind(owner)
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(backend)?;
            if found.is_none() {
                return Ok(false);
            }
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(CANCEL_CHANNEL)
                .bind(turn_id)
                .execute(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(true)
        })
    }

    fn cancellations(&self) -> mpsc::UnboundedReceiver<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut cancels) = self.inner.cancels.lock() {
            *cancels = Some(tx);
        }
        rx
    }

    fn is_running<'a>(&'a self, turn_id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let row = sqlx::query("SELECT 1 FROM buddy_running_turns WHERE turn_id = $1")
                .bind(turn_id)
                .fetch_optional(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(row.is_some())
        })
    }

    fn shares_events(&self) -> bool {
        true
    }

    fn append_events<'a>(
        &'a self,
        log_id: &'a str,
        owner: &'a str,
        events: &'a [StoredEvent],
        ended: bool,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let seqs: Vec<i64> = events
                .iter()
                .map(|e| i64::try_from(e.seq).unwrap_or(i64::MAX))
                .collect();
            let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
            let bodies: Vec<&str> = events.iter().map(|e| e.data.as_str()).collect();
            let now = now_ms();
            sqlx::query(APPEND_EVENTS)
                .bind(log_id)
                .bind(owner)
                .bind(now)
                .bind(ended.then_some(now))
                .bind(&seqs)
                .bind(&names)
                .bind(&bodies)
                .execute(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn events_after<'a>(
        &'a self,
        log_id: &'a str,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Option<StoredEvents>, StoreError>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT l.owner, l.ended_at_ms, e.seq, e.name, e.body FROM buddy_turn_logs l
                 LEFT JOIN LATERAL (SELECT seq, name, body FROM buddy_turn_events
                     WHERE log_id = l.log_id AND seq > $2 ORDER BY seq LIMIT $3) e ON TRUE
                 WHERE l.log_id = $1 ORDER BY e.seq",
            )
            .bind(log_id)
            .bind(i64::try_from(after).unwrap_or(i64::MAX))
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.inner.pool)
            .await
            .map_err(backend)?;
            let Some(first) = rows.first() else {
                return Ok(None);
            };
            let owner: String = first.try_get(0).map_err(backend)?;
            let ended: Option<i64> = first.try_get(1).map_err(backend)?;
            let mut events = Vec::with_capacity(rows.len());
            for row in &rows {
                let Some(seq) = row.try_get::<Option<i64>, _>(2).map_err(backend)? else {
                    continue;
                };
                events.push(StoredEvent {
                    seq: u64::try_from(seq).unwrap_or(0),
                    name: row.try_get(3).map_err(backend)?,
                    data: row.try_get(4).map_err(backend)?,
                });
            }
            Ok(Some(StoredEvents {
                owner,
                ended: ended.is_some(),
                events,
            }))
        })
    }

    fn prune_events(
        &self,
        ended_before_ms: i64,
        abandoned_before_ms: i64,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let row = sqlx::query(
                "WITH gone AS (DELETE FROM buddy_turn_logs
                     WHERE ended_at_ms < $1 OR (ended_at_ms IS NULL AND started_at_ms < $2)
                     RETURNING log_id),
                 events AS (DELETE FROM buddy_turn_events WHERE log_id IN (SELECT log_id FROM gone))
                 SELECT COUNT(*) FROM gone",
            )
            .bind(ended_before_ms)
            .bind(abandoned_before_ms)
            .fetch_one(&self.inner.pool)
            .await
            .map_err(backend)?;
            let count: i64 = row.try_get(0).map_err(backend)?;
            Ok(u64::try_from(count).unwrap_or(0))
        })
    }
}

/// A batch of a log's events in one statement: the log's row goes in with the first
/// batch (and is marked ended with the last), the events with every batch.
const APPEND_EVENTS: &str = "
WITH log AS (
    INSERT INTO buddy_turn_logs (log_id, owner, started_at_ms, ended_at_ms) VALUES ($1, $2, $3, $4)
    ON CONFLICT (log_id) DO UPDATE SET ended_at_ms = COALESCE(EXCLUDED.ended_at_ms, buddy_turn_logs.ended_at_ms)
)
INSERT INTO buddy_turn_events (log_id, seq, name, body)
SELECT $1, * FROM UNNEST($5::BIGINT[], $6::TEXT[], $7::TEXT[])
ON CONFLICT (log_id, seq) DO NOTHING";
