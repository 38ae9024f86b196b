//! A conversation's turns: opened (with the conversation and first messages, at once),
//! begun, finished, closed with their last messages, their tapes read, deleted.

use buddy_core::{BoxFuture, StopReason, TurnStats};

use super::history::History;
use crate::columns::runs;
use crate::deletion::TurnDeletion;
use crate::error::StoreError;
use crate::records::{ResponseOrigin, TurnClosing, TurnOpening};

/// The turns run on conversations: each one's record, from its opening to its end.
pub trait Turns: History {
    /// Writes a turn's opening (see [`TurnOpening`]) and returns its conversation's id;
    /// `NotFound` when the conversation named does not exist. A store that can does it
    /// in one transaction; this default writes step by step, deletes a conversation it
    /// created if a later step fails, and closes a turn it began on an existing one with
    /// `store_error`.
    fn open_turn<'a>(
        &'a self,
        opening: TurnOpening<'a>,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(async move {
            let id = match opening.conversation {
                Some(id) if self.conversation_info(id).await?.is_none() => {
                    return Err(StoreError::NotFound(id.to_owned()));
                }
                Some(id) => id.to_owned(),
                None => self.create_conversation(opening.owner).await?,
            };
            let mut begun = false;
            let written = async {
                if let Some(settings) = opening.settings
                    && !self.set_settings(&id, settings).await?
                {
                    return Err(StoreError::NotFound(id.clone()));
                }
                self.begin_turn(&id, opening.turn, opening.model).await?;
                begun = true;
                for (turn, run) in runs(opening.copied, opening.copied_turns) {
                    self.append_messages(&id, turn, run).await?;
                }
                if !opening.messages.is_empty() {
                    self.append_counted(&id, opening.turn, opening.messages, opening.counts)
                        .await?;
                }
                Ok(())
            }
            .await;
            if let Err(e) = written {
                if opening.conversation.is_none() {
                    let _ = self.delete_conversation(&id).await;
                } else if begun {
                    let message = e.to_string();
                    let _ = self
                        .finish_turn(
                            opening.turn,
                            StopReason::StoreError,
                            &TurnStats::default(),
                            Some(&message),
                            None,
                        )
                        .await;
                }
                return Err(e);
            }
            Ok(id)
        })
    }
    /// Records that a turn started.
    fn begin_turn<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        model: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Records how a turn ended, and its tape (what replay plays back), when it has one.
    fn finish_turn<'a>(
        &'a self,
        turn_id: &'a str,
        reason: StopReason,
        stats: &'a TurnStats,
        error: Option<&'a str>,
        tape: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Appends a turn's last messages and records how it ended. If the append fails,
    /// the end is not recorded. A store that can does both in one transaction. A store
    /// that keeps turn claims ([`Turns::claims_of`]) ends the turn's claim in the same
    /// write, whatever else it finds.
    fn close_turn<'a>(&'a self, closing: TurnClosing<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if !closing.last.messages.is_empty() {
                self.append_history(closing.conversation, closing.turn, closing.last)
                    .await?;
            }
            self.finish_turn(
                closing.turn,
                closing.reason,
                closing.stats,
                closing.error,
                closing.tape,
            )
            .await
        })
    }
    /// The instance whose turn claims this store keeps (PostgreSQL, the coordinator of
    /// the instances sharing it), `None` for a store that keeps none: when it is the
    /// server's own coordinator's (`Coordinator::instance`), closing a turn has
    /// ended its claim and the server does not release it with a write of its own.
    fn claims_of(&self) -> Option<&str> {
        None
    }
    /// The tapes a conversation's turns kept, as (turn id, tape JSON), oldest turn first.
    fn turn_tapes<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>>;
    /// Records what the Responses API request that made turn `turn` said of it (read back
    /// as [`TurnRecord::response`](crate::TurnRecord::response)); `NotFound` for a turn
    /// this store does not hold.
    fn set_response_origin<'a>(
        &'a self,
        turn: &'a str,
        origin: &'a ResponseOrigin,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Deletes turn `turn` of conversation `conversation` and only it: the last live turn
    /// goes with its messages (and the conversation, when it was the only one); a turn
    /// later turns build on is hidden, its messages kept as their context.
    fn delete_turn<'a>(
        &'a self,
        conversation: &'a str,
        turn: &'a str,
    ) -> BoxFuture<'a, Result<TurnDeletion, StoreError>>;
}
