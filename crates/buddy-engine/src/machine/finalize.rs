//! Finalize: one last model call without tools, asking for the answer from what the
//! turn has; its reply is checked before it is taken.

use buddy_core::{CallPurpose, ChatEvent, GuardAction, GuardKind, StopReason};
use tracing::{debug, warn};

use super::{End, State, Turn};
use crate::judge::{FinalCheck, FinalizeCause, Judge, Trip};
use crate::model_call::CallEnd;
use crate::policy::OnLimit;
use crate::tape::TapeCalls;
use crate::words;

impl Turn<'_> {
    /// The Finalize step (or an error end when `on_limit = "error"`).
    pub(super) async fn finalize(&mut self, cause: FinalizeCause) -> State {
        if let Some(end) = self.stopped_before_call() {
            return State::End(end);
        }
        let reason = cause.reason;
        if self.judge.policy().on_limit == OnLimit::Error {
            self.announce(cause.trip(GuardAction::Error)).await;
            return State::End(End::Failed {
                reason,
                message: format!(
                    "turn stopped ({reason}): {}; policy on_limit = \"error\" ends it without an answer",
                    cause.detail
                ),
            });
        }
        self.announce(cause.trip(GuardAction::Finalize)).await;
        let estimate = self.next_call_estimate();
        if !self.judge.affords_answer(&self.stats, estimate) {
            // The money budget has no room for one more call: buddy answers from the
            // tool results rather than pass it.
            debug!(%reason, "finalize: no money left for the answer call");
            return answered(reason, String::new());
        }
        if self.lease.child_out_of_budget() || !self.lease.take_final_call() {
            // Sub-agents used the calls of the tree: buddy answers from the tool results.
            debug!(%reason, "finalize: no model call left in the tree for the answer");
            return answered(reason, String::new());
        }
        debug!(%reason, detail = %cause.detail, "finalize: one last model call without tools");
        let instruction = words::finalize_instruction(&cause.detail);
        // Tools stay defined but not callable: some APIs (Anthropic) refuse a history with
        // tool blocks and no tool definitions; providers without `tool_choice` drop them.
        let toolbox = self.toolbox_handle();
        let all_tools = toolbox.specs();
        let defined = (!all_tools.is_empty()).then_some(all_tools);
        // A server that refused the repeated calls is asked without them.
        self.prune_repeats = reason == StopReason::ProviderRefusedLoop;
        let reply = match self
            .model_call(defined, Some(&instruction), CallPurpose::Finalize)
            .await
        {
            Ok(reply) => reply,
            Err(CallEnd::Cancelled(_)) => return State::End(End::Cancelled),
            Err(CallEnd::Overflow(message)) => {
                return State::End(End::Failed {
                    reason: StopReason::ContextOverflow,
                    message,
                });
            }
            Err(CallEnd::Invalid(e)) => {
                return State::End(End::Failed {
                    reason: StopReason::InvalidRequest,
                    message: e.to_string(),
                });
            }
            Err(CallEnd::ContextRefused(e) | CallEnd::Provider(e)) => {
                warn!(error = %e, "finalize call failed; answering from the tool results");
                return answered(reason, String::new());
            }
            Err(CallEnd::Deadline) => return answered(reason, String::new()),
            // The key's room cannot take the answer call: buddy answers from the results.
            Err(CallEnd::NoRoom(why)) => return self.no_room(why, reason).await,
        };
        if !reply.tool_calls.is_empty() {
            debug!(
                ignored = reply.tool_calls.len(),
                "finalize reply asked for tools; ignored"
            );
        }
        self.tape
            .settle_calls(reply.tape_step, TapeCalls::Inline(reply.tool_calls));
        if reply.chanted.is_some() {
            self.announce(Trip::new(
                GuardKind::RepetitiveOutput,
                GuardAction::CutReply,
                "the final reply repeated one chunk of text over and over; it was cut after the first copy",
            ))
            .await;
        }
        let names = self.tool_names();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        match Judge::check_final(reply.text, &instruction, &names, self.ledger.this_turn()) {
            FinalCheck::Use(text) => answered(reason, text),
            FinalCheck::Compose(trip) => {
                self.announce(trip).await;
                answered(reason, String::new())
            }
            FinalCheck::Append {
                answer,
                addition,
                trip,
            } => {
                self.announce(trip).await;
                self.events
                    .emit(ChatEvent::TextDelta { text: addition })
                    .await;
                answered(reason, answer)
            }
        }
    }
}

/// The end with `text` as the answer (buddy writes one when it is empty).
fn answered(reason: StopReason, text: String) -> State {
    State::End(End::Answered { reason, text })
}
