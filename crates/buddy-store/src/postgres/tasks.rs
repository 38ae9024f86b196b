//! The tasks tool calls became, on PostgreSQL.

use std::collections::HashMap;

use buddy_core::{BoxFuture, RecordedTask};

use super::PgStore;
use super::rows::backend;
use crate::columns::now_ms;
use crate::error::StoreError;
use crate::store::Tasks;

impl Tasks for PgStore {
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
    ) -> BoxFuture<'a, Result<HashMap<String, RecordedTask>, StoreError>> {
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
}
