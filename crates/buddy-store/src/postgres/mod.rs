//! The PostgreSQL store, for several `buddy serve` instances that behave as one server:
//! conversations, turns and the running-turn registry live in the database, and cancels
//! travel between instances with LISTEN/NOTIFY.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use buddy_core::{BoxFuture, Message, RecordedTask, StopReason, TokenCount, TurnStats, Usd};

use crate::deletion::TurnDeletion;
use sqlx::Row;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use tokio::sync::mpsc;

mod coordinate;
mod deletes;
mod fork;
mod ledger;
mod schema;
mod writes;

use schema::SCHEMA;
use writes::{
    APPEND_MESSAGES, CLOSE_TURN, FINISH_TURN, MessageColumns, OPEN_CONVERSATION, OPEN_TURN,
    with_messages, write,
};

use crate::store::{
    ConversationDetail, ConversationInfo, ConversationSummary, CountedHistory, ForkCopy, SpendHold,
    Store, StoreError, TurnClosing, TurnOpening, TurnRecord, decode, first_user_title,
    listed_title, new_id, now_ms, runs, settings, stored_count, turn_end,
};

/// The channel cancel requests travel on.
const CANCEL_CHANNEL: &str = "buddy_cancel";
/// The channel requests to copy a log's events travel on.
const EVENTS_CHANNEL: &str = "buddy_events";
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
    /// Where requests to copy a log's events go (see `Coordinator::event_requests`).
    event_requests: Mutex<Option<mpsc::UnboundedSender<String>>>,
}

/// A stored `fork_before`; a negative one (never written) reads as none.
fn fork_before(stored: Option<i64>) -> Option<u64> {
    stored.and_then(|n| u64::try_from(n).ok())
}

/// A failed statement; a value that does not decode as its type is a damaged record,
/// not a failure a retry could mend.
fn backend(e: sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
            StoreError::Corrupt(format!("postgres: {e}"))
        }
        e => StoreError::Backend(format!("postgres: {e}")),
    }
}

/// A pooled connection idle for longer than this is checked before use (a dead one is
/// replaced); one used more recently goes straight to its statement. sqlx's default
/// checks every connection on every use: a round trip of its own before each statement.
const CHECK_IDLE_AFTER: Duration = Duration::from_secs(1);

/// What every connection sets for its session when it is made (one statement, once per
/// connection). `plan_cache_mode`: each statement of the store finds its rows by key (a
/// conversation, a turn, an owner), so the plan PostgreSQL keeps for a prepared statement
/// is as good as one made for its values; left to choose, it planned a turn's closing
/// statement afresh on every execution (its cost estimated over `UNNEST`ed arrays of
/// unknown length): ~0.24 ms of planning per turn (`scripts/profile-postgres.sh`,
/// BENCHMARKS §3). A `SET`, not a start-up option, so connection poolers that refuse
/// start-up options (PgBouncer) still work.
const SESSION_SETTINGS: &str = "SET plan_cache_mode = force_generic_plan";

/// A pool of at most `connections` to `url`; an error says what to check.
async fn pool(url: &str, connections: u32) -> Result<PgPool, StoreError> {
    let unreachable = |e: sqlx::Error| {
        StoreError::Backend(format!(
            "cannot connect to PostgreSQL ({e}); check `store` (postgres://user:password@host:port/database) and that the server runs"
        ))
    };
    let options = url.parse::<PgConnectOptions>().map_err(unreachable)?;
    PgPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(Duration::from_secs(10))
        .test_before_acquire(false)
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::Executor::execute(conn, SESSION_SETTINGS).await?;
                Ok(())
            })
        })
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > CHECK_IDLE_AFTER {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
        .connect_with(options)
        .await
        .map_err(unreachable)
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
            event_requests: Mutex::new(None),
        });
        inner.heartbeat().await?;
        inner.sweep().await?;
        let weak = Arc::downgrade(&inner);
        tokio::spawn(heartbeats(weak.clone()));
        let mut listener = PgListener::connect_with(&inner.pool)
            .await
            .map_err(backend)?;
        listener
            .listen_all([CANCEL_CHANNEL, EVENTS_CHANNEL])
            .await
            .map_err(backend)?;
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
                event_requests: Mutex::new(None),
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
                let to = match n.channel() {
                    EVENTS_CHANNEL => &inner.event_requests,
                    _ => &inner.cancels,
                };
                if let Ok(to) = to.lock()
                    && let Some(tx) = to.as_ref()
                {
                    let _ = tx.send(n.payload().to_owned());
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cancel and event-request listener failed; retrying");
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
        Box::pin(load(&self.inner.pool, id))
    }

    fn append_counted<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        messages: &'a [Message],
        counts: &'a [Option<TokenCount>],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let columns = MessageColumns::of(messages, counts, &[])?;
            let query = with_messages(APPEND_MESSAGES, id, turn_id, &columns).bind(&columns.times);
            write(query, &self.inner.pool, id).await
        })
    }

    fn append_history<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        history: &'a CountedHistory,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let columns =
                MessageColumns::of(&history.messages, &history.counts, &history.times_ms)?;
            let query = with_messages(APPEND_MESSAGES, id, turn_id, &columns).bind(&columns.times);
            write(query, &self.inner.pool, id).await
        })
    }

    fn open_turn<'a>(
        &'a self,
        opening: TurnOpening<'a>,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(async move {
            let (id, sql) = match opening.conversation {
                Some(id) => (id.to_owned(), OPEN_TURN),
                None => (new_id("conv"), OPEN_CONVERSATION),
            };
            let bind = |columns| {
                let query = with_messages(sql, &id, opening.turn, columns)
                    .bind(opening.model)
                    .bind(&self.inner.instance)
                    .bind(opening.settings.map(serde_json::Value::to_string));
                match opening.conversation {
                    Some(_) => query,
                    None => query.bind(opening.owner),
                }
                .bind(&columns.times)
            };
            let columns = MessageColumns::of(opening.messages, opening.counts, &[])?;
            if opening.copied.is_empty() {
                write(bind(&columns), &self.inner.pool, &id).await?;
                return Ok(id);
            }
            // A branch: the turn, then the copied history with its own turns, then the
            // turn's first messages — one transaction.
            let none = MessageColumns::of(&[], &[], &[])?;
            let mut tx = self.inner.pool.begin().await.map_err(backend)?;
            write(bind(&none), &mut *tx, &id).await?;
            for (turn, run) in runs(opening.copied, opening.copied_turns) {
                let copied = MessageColumns::of(run, &[], &[])?;
                write(
                    with_messages(APPEND_MESSAGES, &id, turn, &copied).bind(&copied.times),
                    &mut *tx,
                    &id,
                )
                .await?;
            }
            let own =
                with_messages(APPEND_MESSAGES, &id, opening.turn, &columns).bind(&columns.times);
            write(own, &mut *tx, &id).await?;
            tx.commit().await.map_err(backend)?;
            Ok(id)
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
            let stats = serde_json::to_string(closing.stats).unwrap_or_default();
            if closing.last.messages.is_empty() {
                let query = sqlx::query(FINISH_TURN)
                    .bind(closing.conversation)
                    .bind(now_ms())
                    .bind(closing.turn)
                    .bind(closing.reason.as_str())
                    .bind(stats)
                    .bind(closing.error)
                    .bind(closing.tape);
                query.execute(&self.inner.pool).await.map_err(backend)?;
                return Ok(());
            }
            let last = closing.last;
            let columns = MessageColumns::of(&last.messages, &last.counts, &last.times_ms)?;
            let query = with_messages(CLOSE_TURN, closing.conversation, closing.turn, &columns)
                .bind(closing.reason.as_str())
                .bind(stats)
                .bind(closing.error)
                .bind(closing.tape)
                .bind(&columns.times);
            write(query, &self.inner.pool, closing.conversation).await
        })
    }

    fn claims_of(&self) -> Option<&str> {
        Some(&self.inner.instance)
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
            let rows = sqlx::query(
                "SELECT id, model, started_at_ms, finished_at_ms, stop_reason, stats, error, hidden
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
                        hidden: row.try_get(7).map_err(backend)?,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
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

    fn fork_conversation<'a>(
        &'a self,
        fork: ForkCopy<'a>,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(fork::write(&self.inner.pool, fork))
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

    fn record_call_task<'a>(
        &'a self,
        id: &'a str,
        call_id: &'a str,
        task: &'a RecordedTask,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO buddy_call_tasks (conversation_id, call_id, server, task_id, created_at_ms) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (conversation_id, call_id) \
                 DO UPDATE SET server = EXCLUDED.server, task_id = EXCLUDED.task_id",
            )
            .bind(id)
            .bind(call_id)
            .bind(&task.server)
            .bind(&task.task_id)
            .bind(now_ms())
            .execute(&self.inner.pool)
            .await
            .map_err(backend)?;
            Ok(())
        })
    }

    fn call_tasks<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<std::collections::HashMap<String, RecordedTask>, StoreError>> {
        Box::pin(async move {
            let rows: Vec<(String, String, String)> = sqlx::query_as(
                "SELECT call_id, server, task_id FROM buddy_call_tasks WHERE conversation_id = $1",
            )
            .bind(id)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(backend)?;
            Ok(rows
                .into_iter()
                .map(|(call_id, server, task_id)| (call_id, RecordedTask { server, task_id }))
                .collect())
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

    fn remove_messages<'a>(
        &'a self,
        conversation: &'a str,
        seqs: &'a [i64],
    ) -> BoxFuture<'a, Result<usize, StoreError>> {
        Box::pin(async move {
            let done = sqlx::query(
                "DELETE FROM buddy_messages WHERE conversation_id = $1 AND seq = ANY($2)",
            )
            .bind(conversation)
            .bind(seqs)
            .execute(&self.inner.pool)
            .await
            .map_err(backend)?;
            Ok(done.rows_affected() as usize)
        })
    }

    fn delete_turn<'a>(
        &'a self,
        conversation: &'a str,
        turn: &'a str,
    ) -> BoxFuture<'a, Result<TurnDeletion, StoreError>> {
        Box::pin(deletes::delete_turn(&self.inner.pool, conversation, turn))
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

    fn hold_spend<'a>(&'a self, hold: SpendHold<'a>) -> BoxFuture<'a, Result<Usd, StoreError>> {
        Box::pin(ledger::hold(&self.inner.pool, hold))
    }

    fn settle_spend<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        day: &'a str,
        cost: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(ledger::settle(&self.inner.pool, owner, id, day, cost))
    }

    fn stored_bytes<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(ledger::stored_bytes(&self.inner.pool, owner))
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
