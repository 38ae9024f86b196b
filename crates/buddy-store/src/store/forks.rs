//! Forks: a new conversation made of the start of another.

use buddy_core::BoxFuture;

use super::history::History;
use crate::columns::runs;
use crate::error::StoreError;
use crate::records::ForkCopy;

/// Forks of conversations.
pub trait Forks: History {
    /// Writes a fork (see [`ForkCopy`]) and returns its id; `NotFound` when `from` does
    /// not exist. The stores here do it in one transaction, keeping each copied message's
    /// time and count and recording where the fork came from (`forked_from`,
    /// `fork_before`); this default copies the messages only, step by step, with their
    /// original turn ids and no records.
    fn fork_conversation<'a>(
        &'a self,
        fork: ForkCopy<'a>,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(async move {
            let detail = self
                .get_conversation(fork.from)
                .await?
                .ok_or_else(|| StoreError::NotFound(fork.from.to_owned()))?;
            let before = fork.before.min(detail.messages.len());
            let id = self.create_conversation(fork.owner).await?;
            let written = async {
                if detail.settings.as_object().is_some_and(|s| !s.is_empty()) {
                    self.set_settings(&id, &detail.settings).await?;
                }
                let turns = &detail.message_turns[..before.min(detail.message_turns.len())];
                for (turn, run) in runs(&detail.messages[..before], turns) {
                    self.append_messages(&id, turn, run).await?;
                }
                Ok(())
            }
            .await;
            if let Err(e) = written {
                let _ = self.delete_conversation(&id).await;
                return Err(e);
            }
            Ok(id)
        })
    }
}
