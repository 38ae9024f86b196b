//! Long-running tool work that outlives a process: a tool call that became a task on
//! its server (MCP Tasks) is recorded with its call, so a turn after a restart waits on
//! the same task again instead of answering the call as interrupted.

use serde::{Deserialize, Serialize};

use crate::BoxFuture;

/// A task a tool call became: the server it runs on and its id there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedTask {
    /// The MCP server's name (its `[[mcp]]` entry).
    pub server: String,
    /// The task's id on that server.
    pub task_id: String,
}

/// Keeps the tasks tool calls become (a store, for a durable turn).
pub trait TaskLog: std::fmt::Debug + Send + Sync {
    /// Records that call `call_id` became `task`; the tool waits for it before polling,
    /// so a crash from here on finds it. A failure is logged, not fatal: the call then
    /// ends as interrupted after a restart, as without a record.
    fn created<'a>(&'a self, call_id: &'a str, task: &'a RecordedTask) -> BoxFuture<'a, ()>;
    /// The log for a call of tool `name`, when it records under keys of its own (a
    /// sub-agent's calls are recorded under their caller's call); `None`: this one.
    fn for_call(&self, _name: &str) -> Option<std::sync::Arc<dyn TaskLog>> {
        None
    }
}
