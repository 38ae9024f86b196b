//! The PostgreSQL store, for several `buddy serve` instances that behave as one server:
//! conversations, turns and the running-turn registry live in the database, and cancels
//! travel between instances with LISTEN/NOTIFY. What it does for each subject is in the
//! files beside this one.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::mpsc;

use crate::columns::{new_id, now_ms};
use crate::error::StoreError;
use pool::Pool as PgPool;
use rows::backend;
use schema::SCHEMA;

mod conversations;
mod coordinate;
mod forks;
mod history;
#[macro_use]
mod owner_bytes;
mod pool;
mod relay;
mod rows;
mod schema;
mod spend;
mod tasks;
mod turns;
mod writes;

/// The channel cancel requests travel on.
const CANCEL_CHANNEL: &str = "buddy_cancel";
/// The channel announcing answers posted for a turn another instance runs.
const ANSWERS_CHANNEL: &str = "buddy_answers";
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
    /// Where announcements of answers posted for this instance's turns go.
    postings: Mutex<Option<mpsc::UnboundedSender<String>>>,
}

/// A pool of at most `connections` to `url`; an error says what to check.
async fn pool(url: &str, connections: u32) -> Result<PgPool, StoreError> {
    let unreachable = |e: sqlx::Error| {
        StoreError::Backend(format!(
            "cannot connect to PostgreSQL ({e}); check `store` (postgres://user:password@host:port/database) and that the server runs"
        ))
    };
    let options = url.parse::<PgConnectOptions>().map_err(unreachable)?;
    PgPool::connect(options, connections)
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
            postings: Mutex::new(None),
        });
        inner.heartbeat().await?;
        inner.sweep().await?;
        let weak = Arc::downgrade(&inner);
        tokio::spawn(heartbeats(weak.clone()));
        // The listener keeps a connection of its own (sqlx reconnects it when it is lost).
        let listening = PgPoolOptions::new()
            .max_connections(1)
            .connect_lazy_with(inner.pool.options().clone());
        let mut listener = PgListener::connect_with(&listening)
            .await
            .map_err(backend)?;
        listener
            .listen_all([CANCEL_CHANNEL, EVENTS_CHANNEL, ANSWERS_CHANNEL])
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
                postings: Mutex::new(None),
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
        let ended: Vec<String> = sqlx::query_scalar(
            "UPDATE buddy_turns SET stop_reason = 'interrupted', finished_at_ms = $2
             WHERE finished_at_ms IS NULL AND instance NOT IN (SELECT id FROM buddy_instances WHERE last_seen_ms > $1)
             RETURNING conversation_id",
        )
        .bind(now - STALE_MS)
        .bind(now)
        .fetch_all(&self.pool)
        .await
        .map_err(backend)?;
        if !ended.is_empty() {
            sqlx::query(owner_bytes::SWEEP_PENDING)
                .bind(&ended)
                .execute(&self.pool)
                .await
                .map_err(backend)?;
        }
        sqlx::query(
            "DELETE FROM buddy_running_turns WHERE instance NOT IN (SELECT id FROM buddy_instances WHERE last_seen_ms > $1)",
        )
        .bind(now - STALE_MS)
        .execute(&self.pool)
        .await
        .map_err(backend)?;
        // Their turns are interrupted: what they held of their keys' room is free again.
        sqlx::query(
            "DELETE FROM buddy_spend_holds WHERE instance IS NOT NULL AND instance NOT IN (SELECT id FROM buddy_instances WHERE last_seen_ms > $1)",
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
                    ANSWERS_CHANNEL => &inner.postings,
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
