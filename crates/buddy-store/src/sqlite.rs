//! The embedded SQLite store: one file, one thread that owns its connection; what it
//! does for each subject is in the files beside this one.

use std::path::{Path, PathBuf};
use std::sync::mpsc;

use buddy_core::BoxFuture;
use rusqlite::{Connection, params};

use crate::columns::now_ms;
use crate::error::StoreError;
use schema::MIGRATIONS;

mod conversations;
mod forks;
mod history;
mod schema;
mod spend;
mod tasks;
mod turns;

/// Makes the database and its `-wal` and `-shm` files buddy's own before SQLite opens
/// them: each created 0600 in one step (SQLite gives journal files it creates the
/// database's mode, and opens every file with `O_NOFOLLOW`), an existing one refused when
/// it is a symlink or another user's, narrowed to 0600 when others may read it. An empty
/// `-wal` or `-shm` is one SQLite starts afresh.
fn own_files(db: &Path) -> std::io::Result<()> {
    if db == Path::new(":memory:") {
        return Ok(());
    }
    buddy_files::open_private(db)?;
    let [wal, shm, journal] = buddy_files::sqlite_companions(db);
    for companion in [wal, shm] {
        buddy_files::open_private(&companion)?;
    }
    if journal.exists() {
        buddy_files::open_private(&journal)?;
    }
    Ok(())
}

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
            buddy_files::create_private_dirs(dir).map_err(|e| fail(&e))?;
        }
        own_files(path).map_err(|e| fail(&e))?;
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
}

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

#[cfg(test)]
mod tests {
    use buddy_core::{Message, StopReason, ToolCall, TurnStats, Usd};

    use super::SqliteStore;
    use crate::error::StoreError;
    use crate::records::TurnEnd;
    use crate::store::prelude::*;

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
