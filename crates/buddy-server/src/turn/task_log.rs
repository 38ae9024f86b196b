//! The tasks a stored conversation's calls become, kept in the store: a turn after a
//! crash waits on them again instead of answering the calls as interrupted.

use std::sync::Arc;

use buddy_core::{BoxFuture, RecordedTask, TaskLog};
use buddy_store::Store;

/// Records each task a call of conversation `conversation` becomes.
pub(crate) struct StoreTaskLog {
    store: Arc<dyn Store>,
    conversation: String,
}

impl StoreTaskLog {
    pub(crate) fn new(store: Arc<dyn Store>, conversation: String) -> Self {
        StoreTaskLog {
            store,
            conversation,
        }
    }
}

impl std::fmt::Debug for StoreTaskLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreTaskLog")
            .field("conversation", &self.conversation)
            .finish()
    }
}

impl TaskLog for StoreTaskLog {
    fn created<'a>(&'a self, call_id: &'a str, task: &'a RecordedTask) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(e) = self
                .store
                .record_call_task(&self.conversation, call_id, task)
                .await
            {
                tracing::warn!(conversation = %self.conversation, call = %call_id, task = %task.task_id, error = %e,
                    "cannot record the task a call became; after a crash the call is answered as interrupted");
            }
        })
    }
}
