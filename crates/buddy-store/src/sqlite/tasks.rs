//! The tasks tool calls became, on SQLite.

use std::collections::HashMap;

use buddy_core::{BoxFuture, RecordedTask};
use rusqlite::params;

use super::{SqliteStore, backend};
use crate::columns::now_ms;
use crate::error::StoreError;
use crate::store::Tasks;

impl Tasks for SqliteStore {
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
    ) -> BoxFuture<'a, Result<HashMap<String, RecordedTask>, StoreError>> {
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
}
