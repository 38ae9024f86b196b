//! The tasks tool calls became on their MCP servers, kept so that a turn after a restart
//! waits on them again.

use std::collections::HashMap;

use buddy_core::{BoxFuture, RecordedTask};

use crate::error::StoreError;

/// The tasks tool calls became on their servers, per conversation.
pub trait Tasks: Send + Sync {
    /// Records that call `call_id` of conversation `id` became `task` on its server, so
    /// a turn after a restart can wait on it again ([`Tasks::call_tasks`]).
    fn record_call_task<'a>(
        &'a self,
        id: &'a str,
        call_id: &'a str,
        task: &'a RecordedTask,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The tasks recorded for calls of conversation `id`, by call id.
    fn call_tasks<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<HashMap<String, RecordedTask>, StoreError>>;
}
