//! End: the one terminal event of a turn, and the outcome it leaves behind.

use buddy_core::{ChatEvent, Message, StopReason};
use tracing::debug;

use super::{End, Turn, store_failed};
use crate::budget::with_delegated;
use crate::budget::with_side_calls;
use crate::judge::Judge;
use crate::request::TurnOutcome;
use crate::tape::TapeEnd;

impl Turn<'_> {
    /// The End step: emits the terminal event and returns the outcome.
    pub(super) async fn end(mut self, end: End) -> TurnOutcome {
        let end = match end {
            End::Answered { reason, text } => self.answered(reason, text).await,
            other => other,
        };
        self.stats.elapsed_ms = self.elapsed_ms();
        self.lease.book(&self.stats);
        // What the turn reports covers its sub-agents and the model calls its tools made
        // for their servers (sampling; the lease's pool has them already); its tape keeps
        // its own calls.
        let own = self.stats;
        self.stats = with_side_calls(
            with_delegated(own, self.lease.delegated()),
            self.side_usage.take(),
        );
        let (reason, answer, error) = match end {
            End::Answered { reason, text } | End::Paused { reason, text } => {
                debug!(%reason, stats = ?self.stats, "turn done");
                self.events
                    .emit(ChatEvent::Done {
                        reason,
                        answer: text.clone(),
                        stats: self.stats,
                    })
                    .await;
                (reason, Some(text), None)
            }
            End::Cancelled => {
                debug!("turn cancelled");
                // What the client saw streamed stays in the history, as OpenAI keeps a
                // cancelled response's output.
                let partial = std::mem::take(&mut self.partial_reply);
                if !partial.is_empty() {
                    self.ledger.push(Message::assistant(partial)).await;
                }
                self.events
                    .emit(ChatEvent::Done {
                        reason: StopReason::Cancelled,
                        answer: String::new(),
                        stats: self.stats,
                    })
                    .await;
                (StopReason::Cancelled, None, None)
            }
            End::Failed { reason, message } => {
                debug!(%reason, %message, "turn ended with an error");
                self.events
                    .emit(ChatEvent::Error {
                        reason,
                        message: message.clone(),
                        stats: self.stats,
                    })
                    .await;
                (reason, None, Some(message))
            }
        };
        self.tape.new_messages = self.ledger.new_count();
        self.tape.ended = Some(TapeEnd {
            reason,
            model_calls: own.model_calls,
            tool_calls: own.tool_calls,
        });
        TurnOutcome {
            reason,
            answer,
            error,
            stats: self.stats,
            first_new: self.ledger.first_new(),
            counts: self.ledger.kept_counts(),
            messages: self.ledger.take_messages(),
            tape: self.tape,
        }
    }

    /// The answer joins the history, written by buddy from the tool results when the
    /// model gave none (an empty answer is never `completed`). A turn whose answer could
    /// not be stored ends `store_error` instead.
    async fn answered(&mut self, reason: StopReason, text: String) -> End {
        let (reason, text) = if text.trim().is_empty() {
            let reason = match reason {
                StopReason::Completed | StopReason::FinishTool => StopReason::NoAnswer,
                other => other,
            };
            let fallback = Judge::fallback_answer(self.ledger.this_turn(), reason);
            self.events
                .emit(ChatEvent::TextDelta {
                    text: fallback.clone(),
                })
                .await;
            (reason, fallback)
        } else {
            (reason, text)
        };
        // Parts of the answer that were asked to go on are in the history already.
        let rest = text
            .strip_prefix(self.cut_answer.as_str())
            .filter(|_| !self.cut_answer.is_empty())
            .unwrap_or(&text);
        if !rest.trim().is_empty() || self.cut_answer.is_empty() {
            self.ledger.push(Message::assistant(rest.to_owned())).await;
        }
        match self.ledger.take_record_failure() {
            Some(failure) => store_failed(failure),
            None => End::Answered { reason, text },
        }
    }
}
