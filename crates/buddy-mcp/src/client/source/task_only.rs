//! Tools that take only task-augmented calls (MCP 2025-11-25, `taskSupport:
//! "required"`): remembered once a call showed it, called as tasks from then on; one
//! whose server then refuses the task-augmented call too is left out of the table, the
//! reason kept for `buddy mcp list`.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::ServiceError;

use super::McpSource;
use crate::client::augmented::Augmented;
use crate::requests::caller::Caller;
use crate::requests::handler::Client;

impl McpSource {
    /// The tools buddy calls as tasks (2025-11-25 task-only tools), by their names on
    /// the server.
    pub fn task_only_tools(&self) -> Vec<String> {
        let mut tools: Vec<String> = self
            .task_only
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default();
        tools.sort();
        tools
    }

    /// Whether `tool` takes only task-augmented calls, as an earlier call showed.
    pub(crate) fn is_task_only(&self, tool: &str) -> bool {
        self.task_only.lock().is_ok_and(|t| t.contains(tool))
    }

    pub(crate) fn mark_task_only(&self, tool: &str) {
        tracing::debug!(server = %self.config.name, tool, "an MCP tool takes only task-augmented calls (2025-11-25)");
        if let Ok(mut tools) = self.task_only.lock() {
            tools.insert(tool.to_owned());
        }
    }

    /// Notes, from what a stdio server declared with its tools, those that take only
    /// task-augmented calls: called as tasks from the first call when the server takes
    /// tasks for `tools/call`, left out (with the reason) when it does not.
    pub(crate) fn note_task_support(&self) {
        let declared = self.declared.lock().map(|d| d.clone()).unwrap_or_default();
        for (tool, support) in &declared.task_support {
            if support != "required" {
                continue;
            }
            match declared.tasks_for_tools {
                Some(true) => self.mark_task_only(tool),
                Some(false) => {
                    if let Ok(mut tools) = self.unservable.lock() {
                        tools.insert(tool.clone(), "it takes only task-augmented calls (MCP 2025-11-25 taskSupport \"required\") and the server declares no tasks for tools/call".to_owned());
                    }
                }
                // A 2026-07-28 connection: the server makes tasks itself (task.rs).
                None => {}
            }
        }
    }

    /// Why `tool` is not offered, when buddy found it cannot serve it.
    pub(crate) fn unservable(&self, tool: &str) -> Option<String> {
        self.unservable
            .lock()
            .ok()
            .and_then(|tools| tools.get(tool).cloned())
    }

    /// Calls `tool` as a 2025-11-25 task and waits for its result. A server that refuses
    /// the task-augmented call as well: the tool cannot be served; it leaves the table
    /// (listed again at the next look) and the model reads why.
    pub(crate) async fn call_as_task(
        &self,
        client: &Client,
        tool: &str,
        params: CallToolRequestParams,
        caller: &Caller,
    ) -> Result<CallToolResult, ServiceError> {
        let call = Duration::from_secs_f64(self.config.call_timeout_secs);
        let wait = Duration::from_secs_f64(self.config.task_timeout_secs);
        match crate::client::augmented::call_as_task(client, params, call, wait, caller).await? {
            Augmented::Result(result) => Ok(result),
            Augmented::Refused(said) => {
                let why = format!(
                    "it takes only task-augmented calls (MCP 2025-11-25 taskSupport \"required\"), and the server refused buddy's: {said}"
                );
                tracing::warn!(server = %self.config.name, tool, reason = %why, "an MCP tool is left out");
                if let Ok(mut tools) = self.unservable.lock() {
                    tools.insert(tool.to_owned(), why.clone());
                }
                self.mark_tools_changed();
                Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "MCP tool `{tool}` cannot be used: {why}; it is no longer offered"
                ))]))
            }
        }
    }
}
