//! Start: the five ways a turn begins — a new user message, a person's decisions about
//! paused calls, a capped turn continued, the results of client-run tools, and a history
//! left open by a crash.

use std::collections::HashMap;

use buddy_core::{CallPurpose, Message, StopReason, TurnStats};
use tracing::debug;

use super::{End, Entry, Round, State, Turn};
use crate::approval::resumed_round;
use crate::history_check::check_history;
use crate::judge::FinalizeCause;
use crate::tape::TapeEntry;
use crate::words;

impl Turn<'_> {
    /// The Start step.
    pub(super) async fn start(&mut self, entry: Entry) -> State {
        match entry {
            Entry::Interrupted(then) => {
                for id in self.ledger.interrupted_calls() {
                    if let Some(result) = self.resume_task(&id).await {
                        self.ledger.push(result).await;
                        continue;
                    }
                    debug!(call = %id, "answering a call an interrupted turn left open");
                    self.ledger
                        .push(Message::tool_result(id, words::not_run::INTERRUPTED, true))
                        .await;
                }
                State::Start(*then)
            }
            Entry::NewMessage { user } => {
                if let Some(text) = user {
                    self.tape.entry = TapeEntry::NewMessage {
                        user_at: Some(self.ledger.new_count()),
                    };
                    self.ledger.push(Message::user(text)).await;
                }
                self.checked(
                    self.ledger.messages().len(),
                    State::CallModel(CallPurpose::Turn),
                )
            }
            Entry::ClientResults => {
                if let Some(end) = self.history_invalid(self.ledger.messages().len()) {
                    return State::End(end);
                }
                match self.book_earlier_rounds().await {
                    Some(cause) => State::Finalize(cause),
                    None => State::CallModel(CallPurpose::Turn),
                }
            }
            Entry::Continue => {
                if let Some(end) = self.history_invalid(self.ledger.messages().len()) {
                    return State::End(end);
                }
                // A fresh budget: the limits count from here, while the judge keeps what the
                // earlier rounds found, so their calls are not made again.
                let _ = self.book_earlier_rounds().await;
                self.stats = TurnStats::default();
                self.ledger.push(Message::note(words::CONTINUE_NOTE)).await;
                State::CallModel(CallPurpose::Turn)
            }
            Entry::Decisions(decisions) => {
                let toolbox = self.toolbox();
                let resumed =
                    resumed_round(self.ledger.messages(), &decisions, &self.approval, |name| {
                        toolbox.semantics(name)
                    });
                let resumed = match resumed {
                    Ok(resumed) => resumed,
                    Err(message) => {
                        return State::End(End::Failed {
                            reason: StopReason::InvalidRequest,
                            message,
                        });
                    }
                };
                // The paused round is still open: its calls are answered in this round.
                let given = self.ledger.messages().len().saturating_sub(1);
                if let Some(end) = self.history_invalid(given) {
                    return State::End(end);
                }
                let then = self.book_earlier_rounds().await;
                self.tools_offered_now = true;
                State::ExecuteTools(Round {
                    text: resumed.text,
                    calls: resumed.calls,
                    decided: resumed.decided,
                    notes: resumed.notes,
                    then,
                })
            }
        }
    }

    /// `next`, once the first `len` messages of the history pass the one full check of
    /// what the caller gave (later calls check only what the engine added).
    fn checked(&self, len: usize, next: State) -> State {
        match self.history_invalid(len) {
            Some(end) => State::End(end),
            None => next,
        }
    }

    /// The end of a turn whose given history no provider should receive.
    fn history_invalid(&self, len: usize) -> Option<End> {
        let given = &self.ledger.messages()[..len.min(self.ledger.messages().len())];
        check_history(given).err().map(|e| End::Failed {
            reason: StopReason::InvalidRequest,
            message: e.to_string(),
        })
    }

    /// Books the rounds a resumed turn carries: when a turn paused for tools the client
    /// runs, the client sends the history back with their results and no new user
    /// message. Those rounds belong to this turn: they count against its budget (model
    /// and tool calls), and their results go through the same checks as the results of
    /// server-side calls — so a client-tool loop is caught across round trips. Client
    /// tools are judged as `observed`: by their results. Returns the cause that ends the
    /// turn when the booked rounds already show a loop.
    async fn book_earlier_rounds(&mut self) -> Option<FinalizeCause> {
        let start = self.ledger.after_last_user()?;
        let tail: Vec<Message> = self.ledger.messages()[start..].to_vec();
        self.ledger.rounds_start_at(start);
        let mut ended = None;
        for (i, message) in tail.iter().enumerate() {
            let Message::Assistant { tool_calls, .. } = message else {
                continue;
            };
            if tool_calls.is_empty() {
                continue;
            }
            self.stats.model_calls += 1;
            let mut round = self.judge.book_round();
            let results: HashMap<&str, (&str, bool)> = tail[i + 1..]
                .iter()
                .filter_map(|m| match m {
                    Message::Tool {
                        tool_call_id,
                        content,
                        is_error,
                    } => Some((tool_call_id.as_str(), (content.as_str(), *is_error))),
                    _ => None,
                })
                .rev()
                .collect();
            for call in tool_calls {
                let Some((content, is_error)) = results.get(call.id.as_str()) else {
                    continue;
                };
                self.stats.tool_calls += 1;
                let trips = self
                    .judge
                    .book_call(&mut round, call.clone(), content, *is_error);
                self.announce_all(trips).await;
            }
            if let Some(cause) = self.judge.end_booked_round(round) {
                ended.get_or_insert(cause);
            }
        }
        ended
    }
}
