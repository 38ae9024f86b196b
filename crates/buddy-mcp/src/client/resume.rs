//! Waiting again on a task after a restart: a call that became a task on an HTTP
//! server is recorded with its call (a stdio server's tasks end with the process that
//! started it), and the turn after a crash polls the same task id for its result.

use std::time::Duration;

use buddy_core::{RecordedTask, SkillError};

use crate::client::source::McpSource;
use crate::requests::caller::Caller;

impl McpSource {
    /// Records that the caller's call became task `task_id`, when a restart could wait
    /// on it again (an HTTP server, a caller that keeps tasks).
    pub(crate) async fn record_task(&self, caller: &Caller, task_id: &str) {
        if self.config().url.is_none() || caller.call_id.is_empty() {
            return;
        }
        if let Some(log) = &caller.tasks {
            let task = RecordedTask {
                server: self.config().name.clone(),
                task_id: task_id.to_owned(),
            };
            log.created(&caller.call_id, &task).await;
        }
    }

    /// Waits again on task `task_id`, which a call became before a restart, as the
    /// call did (polled within `task_timeout_secs`, its `input_required` rounds answered
    /// for `caller`), and returns the tool's result; a task the server no longer knows
    /// is an error result saying so.
    pub(crate) async fn resume_task(
        &self,
        task_id: &str,
        caller: Caller,
    ) -> Result<String, SkillError> {
        let name = self.config().name.clone();
        let client = self.connected().await.map_err(|e| {
            SkillError::Failed(format!(
                "{e}; the call's task {task_id} could not be waited on after the restart"
            ))
        })?;
        let task = crate::client::task::get_task(&client, task_id)
            .await
            .map_err(|e| {
                SkillError::Failed(format!(
                    "MCP server `{name}` no longer knows task {task_id} ({e}); the call was interrupted by a restart"
                ))
            })?
            .task;
        let _asking = self.in_flight(&caller);
        let wait = Duration::from_secs_f64(self.config().task_timeout_secs);
        match crate::client::task::await_task(&client, task, wait, &caller).await {
            Ok(result) => crate::client::result::tool_result(&result, None),
            Err(e) => Err(SkillError::Failed(format!(
                "MCP server `{name}`: waiting again on task {task_id} after a restart failed ({e})"
            ))),
        }
    }
}
