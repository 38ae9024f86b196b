//! The store's own pool of PostgreSQL connections, so that a statement is one round trip.
//!
//! sqlx 0.9's pool pings every connection given back to it (`return_to_pool`,
//! unconditional: no setting turns it off), so each statement cost a second round trip.
//! Here a connection whose statement (or transaction) ended cleanly goes straight back;
//! it is checked only when that is in doubt: after an error or a cancelled statement
//! (a ping, or the transaction's `ROLLBACK`, before it is reused; a dead one is closed)
//! and when it has sat idle for over [`CHECK_IDLE_AFTER`] (a ping before it is handed
//! out; a dead one is replaced by a new connection).

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgQueryResult, PgRow, PgStatement};
use sqlx::{Connection, Either, Execute, Executor, Postgres};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A pooled connection idle for longer than this is checked before use (a dead one is
/// replaced); one used more recently goes straight to its statement.
pub(super) const CHECK_IDLE_AFTER: Duration = Duration::from_secs(1);
/// How long a caller waits for a free connection, or for a new one to be made.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long checking a connection in doubt may take before it is given up.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// What every connection sets for its session when it is made (one statement, once per
/// connection). `plan_cache_mode`: each statement of the store finds its rows by key (a
/// conversation, a turn, an owner), so the plan PostgreSQL keeps for a prepared statement
/// is as good as one made for its values; left to choose, it planned a turn's closing
/// statement afresh on every execution (its cost estimated over `UNNEST`ed arrays of
/// unknown length): ~0.24 ms of planning per turn (`scripts/profile-postgres.sh`,
/// BENCHMARKS §3). A `SET`, not a start-up option, so connection poolers that refuse
/// start-up options (PgBouncer) still work.
const SESSION_SETTINGS: &str = "SET plan_cache_mode = force_generic_plan";

/// A pool of at most `max` connections to one database; `&Pool` is a sqlx executor.
#[derive(Clone)]
pub(crate) struct Pool {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("idle", &self.idle_count())
            .finish_non_exhaustive()
    }
}

struct Shared {
    options: PgConnectOptions,
    /// Connections not in use, the most recently used last (handed out first, so the
    /// ones at the bottom are the ones that go stale and get checked).
    idle: Mutex<Vec<(PgConnection, Instant)>>,
    /// One permit per connection that may be in use.
    slots: Arc<Semaphore>,
}

/// How a connection comes back to the pool.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Return {
    /// Its last statement ended cleanly: straight back, unchecked.
    Clean,
    /// In doubt (an error, a cancelled statement): pinged first.
    Check,
    /// Inside a transaction never committed: rolled back first.
    RollBack,
}

impl Pool {
    /// A pool of at most `max` connections made with `options`; one is made now, so a
    /// wrong address or password shows at once.
    pub(crate) async fn connect(options: PgConnectOptions, max: u32) -> Result<Self, sqlx::Error> {
        let permits = usize::try_from(max.max(1)).unwrap_or(1);
        let pool = Pool {
            shared: Arc::new(Shared {
                options,
                idle: Mutex::new(Vec::new()),
                slots: Arc::new(Semaphore::new(permits)),
            }),
        };
        drop(pool.acquire().await?);
        Ok(pool)
    }

    /// The options connections are made with (the listener makes its own from them).
    pub(crate) fn options(&self) -> &PgConnectOptions {
        &self.shared.options
    }

    /// A connection for the caller alone until the returned guard is dropped.
    pub(crate) async fn acquire(&self) -> Result<Conn, sqlx::Error> {
        let permit =
            tokio::time::timeout(ACQUIRE_TIMEOUT, self.shared.slots.clone().acquire_owned())
                .await
                .map_err(|_| sqlx::Error::PoolTimedOut)?
                .map_err(|_| sqlx::Error::PoolClosed)?;
        loop {
            let Some((mut conn, since)) = self.shared.take() else {
                let conn = tokio::time::timeout(ACQUIRE_TIMEOUT, open(&self.shared.options))
                    .await
                    .map_err(|_| sqlx::Error::PoolTimedOut)??;
                return Ok(Conn::new(conn, &self.shared, permit));
            };
            if since.elapsed() <= CHECK_IDLE_AFTER {
                return Ok(Conn::new(conn, &self.shared, permit));
            }
            match tokio::time::timeout(CHECK_TIMEOUT, conn.ping()).await {
                Ok(Ok(())) => return Ok(Conn::new(conn, &self.shared, permit)),
                // Dead (the server ended it, or the network did): dropped, and the next
                // idle one tried, or a new one made.
                _ => {
                    tracing::debug!("an idle PostgreSQL connection was dead; replacing it");
                    self.shared.suspect_idle();
                }
            }
        }
    }

    /// Begins a transaction on a connection of its own (`BEGIN`; `commit` ends it, a
    /// drop without commit rolls it back before the connection is reused).
    pub(crate) async fn begin(&self) -> Result<Tx, sqlx::Error> {
        let mut conn = self.acquire().await?;
        conn.back = Return::Check;
        sqlx::Executor::execute(&mut *conn, "BEGIN")
            .await
            .map_err(|e| self.shared.saw(e))?;
        conn.back = Return::RollBack;
        Ok(Tx { conn })
    }

    /// How many connections sit idle in the pool (tests watch dead ones leave).
    pub(crate) fn idle_count(&self) -> usize {
        self.shared.idle.lock().map(|idle| idle.len()).unwrap_or(0)
    }
}

impl Shared {
    fn take(&self) -> Option<(PgConnection, Instant)> {
        self.idle.lock().ok()?.pop()
    }

    /// Every idle connection is checked before its next use: one was found dead, and
    /// whatever ended it (a restart, `pg_terminate_backend`, the network) likely ended
    /// the others too — so a mass loss costs one failed statement, not one per connection.
    fn suspect_idle(&self) {
        let Some(long_ago) = Instant::now().checked_sub(CHECK_IDLE_AFTER * 2) else {
            return;
        };
        if let Ok(mut idle) = self.idle.lock() {
            for (_, since) in idle.iter_mut() {
                *since = (*since).min(long_ago);
            }
        }
    }

    /// Notes `error` of a statement: a lost connection makes the idle ones suspect.
    fn saw(&self, error: sqlx::Error) -> sqlx::Error {
        if lost(&error) {
            self.suspect_idle();
        }
        error
    }

    fn put(&self, conn: PgConnection) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.push((conn, Instant::now()));
        }
    }
}

/// Whether `error` says the connection itself is gone (rather than the statement failing).
fn lost(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::Tls(_) => true,
        // Class 57P (the server ended the session: admin_shutdown, crash_shutdown,
        // cannot_connect_now) and class 08 (connection exception).
        sqlx::Error::Database(e) => e
            .code()
            .is_some_and(|code| code.starts_with("57P") || code.starts_with("08")),
        _ => false,
    }
}

/// A new connection with the session's settings.
async fn open(options: &PgConnectOptions) -> Result<PgConnection, sqlx::Error> {
    let mut conn = PgConnection::connect_with(options).await?;
    sqlx::Executor::execute(&mut conn, SESSION_SETTINGS).await?;
    Ok(conn)
}

/// A connection taken from the pool; back to it when dropped (see [`Return`]).
pub(crate) struct Conn {
    conn: Option<PgConnection>,
    back: Return,
    shared: Arc<Shared>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Conn {
    fn new(conn: PgConnection, shared: &Arc<Shared>, permit: OwnedSemaphorePermit) -> Self {
        Conn {
            conn: Some(conn),
            back: Return::Clean,
            shared: Arc::clone(shared),
            permit: Some(permit),
        }
    }
}

impl Deref for Conn {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        // Present from `new` until `drop`.
        #[allow(clippy::expect_used)]
        self.conn
            .as_ref()
            .expect("a pooled connection is present until dropped")
    }
}

impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut PgConnection {
        #[allow(clippy::expect_used)]
        self.conn
            .as_mut()
            .expect("a pooled connection is present until dropped")
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let (Some(conn), permit) = (self.conn.take(), self.permit.take()) else {
            return;
        };
        if self.back == Return::Clean {
            self.shared.put(conn);
            drop(permit);
            return;
        }
        // In doubt: checked off the caller's path, its slot held until it is back.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = Arc::clone(&self.shared);
        let back = self.back;
        runtime.spawn(async move {
            match recover(conn, back).await {
                Some(conn) => shared.put(conn),
                None => shared.suspect_idle(),
            }
            drop(permit);
        });
    }
}

/// `conn` again if it still works (after a `ROLLBACK` when it was inside a
/// transaction); `None`, and the connection closed, if not.
async fn recover(mut conn: PgConnection, back: Return) -> Option<PgConnection> {
    let check = async {
        match back {
            Return::RollBack => sqlx::Executor::execute(&mut conn, "ROLLBACK")
                .await
                .map(|_| ()),
            _ => conn.ping().await,
        }
    };
    match tokio::time::timeout(CHECK_TIMEOUT, check).await {
        Ok(Ok(())) => Some(conn),
        _ => {
            tracing::debug!("a PostgreSQL connection failed its check after an error; closed");
            None
        }
    }
}

/// A transaction on a pooled connection: `&mut *tx` runs statements inside it.
pub(crate) struct Tx {
    conn: Conn,
}

impl Tx {
    /// Commits; the connection goes back unchecked. An error leaves it to be checked.
    pub(crate) async fn commit(mut self) -> Result<(), sqlx::Error> {
        self.conn.back = Return::Check;
        sqlx::Executor::execute(&mut *self.conn, "COMMIT")
            .await
            .map_err(|e| self.conn.shared.saw(e))?;
        self.conn.back = Return::Clean;
        Ok(())
    }
}

impl Deref for Tx {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        &self.conn
    }
}

impl DerefMut for Tx {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.conn
    }
}

/// Runs `query` on a connection of the pool and collects its results; the connection
/// goes back unchecked only if every result came.
async fn run<'q, E>(pool: Pool, query: E) -> Result<Vec<Either<PgQueryResult, PgRow>>, sqlx::Error>
where
    E: 'q + Execute<'q, Postgres>,
{
    let mut conn = pool.acquire().await?;
    conn.back = Return::Check;
    let results = (&mut *conn)
        .fetch_many(query)
        .try_collect()
        .await
        .map_err(|e| pool.shared.saw(e))?;
    conn.back = Return::Clean;
    Ok(results)
}

impl<'p> Executor<'p> for &'_ Pool {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<PgQueryResult, PgRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let pool = self.clone();
        futures::stream::once(run(pool, query))
            .map_ok(|results| futures::stream::iter(results.into_iter().map(Ok)))
            .try_flatten()
            .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> futures::future::BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let pool = self.clone();
        Box::pin(async move {
            let mut conn = pool.acquire().await?;
            conn.back = Return::Check;
            let row = (&mut *conn)
                .fetch_optional(query)
                .await
                .map_err(|e| pool.shared.saw(e))?;
            conn.back = Return::Clean;
            Ok(row)
        })
    }

    fn prepare_with<'e>(
        self,
        sql: sqlx::SqlStr,
        parameters: &'e [sqlx::postgres::PgTypeInfo],
    ) -> futures::future::BoxFuture<'e, Result<PgStatement, sqlx::Error>>
    where
        'p: 'e,
    {
        let pool = self.clone();
        Box::pin(async move {
            let mut conn = pool.acquire().await?;
            conn.back = Return::Check;
            let statement = (&mut *conn)
                .prepare_with(sql, parameters)
                .await
                .map_err(|e| pool.shared.saw(e))?;
            conn.back = Return::Clean;
            Ok(statement)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::lost;

    #[test]
    fn a_lost_connection_is_told_from_a_failed_statement() {
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(lost(&sqlx::Error::Io(reset)));
        assert!(lost(&sqlx::Error::Protocol("unexpected message".into())));
        assert!(!lost(&sqlx::Error::RowNotFound));
        assert!(!lost(&sqlx::Error::PoolTimedOut));
        assert!(!lost(&sqlx::Error::ColumnNotFound("id".into())));
    }
}
