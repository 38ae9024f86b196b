//! Route and Wait: carry out the judge's verdict on a reply — the answer, the `finish`
//! call, a pause for approval or for the client's tools, or a round of tool calls.

use std::collections::{BTreeMap, HashMap};

use buddy_core::{CallPurpose, ChatEvent, Message, StopReason, ToolCall};
use tracing::debug;

use super::{End, Round, State, Turn, Wait, non_empty, store_failed};
use crate::approval::calls_needing_approval;
use crate::guards::canonical::canonical_args;
use crate::judge::{Judge, ReplyFacts, Resent, RouteVerdict, Screened, Trip};
use crate::model_call::Reply;
use crate::tape::TapeCalls;
use crate::words;

impl Turn<'_> {
    /// The Route step: decides, from the model's own output, whether the turn is over.
    pub(super) async fn route(&mut self, reply: Reply) -> State {
        let Reply {
            text,
            mut tool_calls,
            finish,
            chanted,
            tape_step,
            ..
        } = reply;
        let chanted = chanted.is_some();
        // The calls as the model sent them, kept for the tape only when buddy changes them.
        let (raw, resent) = if chanted {
            (None, BTreeMap::new())
        } else {
            self.rename_reused_calls(&mut tool_calls)
        };
        let toolbox = self.toolbox_handle();
        let verdict = self.judge.route(
            ReplyFacts {
                text: &text,
                calls: &tool_calls,
                finish: finish.as_ref(),
                chanted,
            },
            resent,
            |name| toolbox.is_external(name),
        );
        debug!(
            model_call = self.stats.model_calls,
            tool_calls = tool_calls.len(),
            finish_reason = ?finish,
            text_chars = text.trim().chars().count(),
            ?verdict,
            "routed"
        );
        let settle_inline = |turn: &mut Self, calls: Vec<ToolCall>, raw: Option<Vec<ToolCall>>| {
            turn.tape
                .settle_calls(tape_step, TapeCalls::Inline(raw.unwrap_or(calls)));
        };
        match verdict {
            RouteVerdict::Chanted(trip) => {
                settle_inline(self, tool_calls, raw);
                self.announce(trip).await;
                State::End(End::Answered {
                    reason: StopReason::RepetitiveOutput,
                    text,
                })
            }
            RouteVerdict::Answer(reason) => {
                settle_inline(self, tool_calls, raw);
                self.answer(text, reason).await
            }
            RouteVerdict::ClientCalls => State::Wait(Wait::Client {
                text,
                calls: tool_calls,
                raw,
                tape_step,
            }),
            RouteVerdict::Finish { index, answer } => {
                let call = tool_calls[index].clone();
                settle_inline(self, tool_calls, raw);
                self.finish_call(text, call, answer).await
            }
            RouteVerdict::Accept(trip) => {
                settle_inline(self, tool_calls, raw);
                self.announce(trip).await;
                State::End(End::Answered {
                    reason: StopReason::Completed,
                    text,
                })
            }
            RouteVerdict::Execute { keep, dropped } => {
                self.execute(text, tool_calls, raw, keep, dropped, tape_step)
                    .await
            }
        }
    }

    /// A reply whose first `keep` calls run (a `dropped` trip says the rest were dropped):
    /// they wait for approval when a person must approve one, else go to ExecuteTools.
    async fn execute(
        &mut self,
        text: String,
        mut tool_calls: Vec<ToolCall>,
        mut raw: Option<Vec<ToolCall>>,
        keep: usize,
        dropped: Option<Trip>,
        tape_step: usize,
    ) -> State {
        if let Some(trip) = dropped {
            raw.get_or_insert_with(|| tool_calls.clone());
            tool_calls.truncate(keep);
            self.announce(trip).await;
        }
        if !self.approval.unattended {
            let toolbox = self.toolbox();
            // A re-sent call will not run: nobody is asked about it.
            let asked: Vec<ToolCall> = tool_calls
                .iter()
                .filter(|c| !self.judge.is_resent(&c.id))
                .cloned()
                .collect();
            let waiting = calls_needing_approval(
                &self.approval,
                &asked,
                |name| toolbox.semantics(name),
                &HashMap::new(),
            );
            if !waiting.is_empty() {
                debug!(calls = waiting.len(), "calls wait for approval");
                return State::Wait(Wait::Approval {
                    text,
                    calls: tool_calls,
                    raw,
                    waiting,
                    tape_step,
                });
            }
        }
        self.push_calls(&text, tool_calls.clone(), tape_step, raw)
            .await;
        // The model went on with tools: a cut answer before is history, not the answer.
        self.cut_answer.clear();
        State::ExecuteTools(Round {
            text,
            calls: tool_calls,
            decided: HashMap::new(),
            notes: Vec::new(),
            then: None,
        })
    }

    /// Renames calls that reuse an id of the history. Returns the calls as the model sent
    /// them (when renamed) and the calls the model sent again under the id of a call that
    /// already ran, with the same arguments: renamed like any reused id, and never run a
    /// second time.
    fn rename_reused_calls(
        &mut self,
        tool_calls: &mut [ToolCall],
    ) -> (Option<Vec<ToolCall>>, BTreeMap<String, Resent>) {
        let mut resent: BTreeMap<String, Resent> = BTreeMap::new();
        if !self.ledger.needs_rename(tool_calls) {
            return (None, resent);
        }
        let sent = tool_calls.to_vec();
        self.ledger.rename_reused_ids(tool_calls);
        for (before, after) in sent.iter().zip(tool_calls.iter()) {
            let same_call = before.id != after.id
                && self
                    .ledger
                    .answered_call(&before.id)
                    .is_some_and(|earlier| {
                        earlier.name == before.name
                            && canonical_args(&earlier.arguments)
                                == canonical_args(&before.arguments)
                    });
            if let Some((content, is_error)) = same_call
                .then(|| self.ledger.result_of(&before.id))
                .flatten()
            {
                resent.insert(
                    after.id.clone(),
                    Resent {
                        earlier: before.id.clone(),
                        content: content.to_owned(),
                        is_error,
                    },
                );
            }
        }
        (Some(sent), resent)
    }

    /// A reply without calls: the answer, unless it holds none (empty, cut off, buddy's
    /// own words, a call written as text) — then the model is asked again, within the
    /// turn's budget of re-asks, before buddy writes the answer from the tool results.
    async fn answer(&mut self, text: String, reason: StopReason) -> State {
        // A reply the output limit cut goes on in the next one: it joins the history as
        // it stands, and the model is asked to continue (within the turn's budget).
        if reason == StopReason::Truncated
            && !text.trim().is_empty()
            && let Some((note, trip)) = self.judge.continuation()
        {
            self.announce(trip).await;
            self.ledger.push(Message::assistant(text.clone())).await;
            self.ledger.push(Message::note(note)).await;
            self.cut_answer.push_str(&text);
            return State::CallModel(CallPurpose::Reask);
        }
        let text = if self.cut_answer.is_empty() {
            text
        } else {
            format!("{}{text}", self.cut_answer)
        };
        let names = self.tool_names();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        if let Some(trip) =
            Judge::tools_ignored(&text, self.tools_offered_now, self.stats.tool_calls, &names)
        {
            self.announce(trip).await;
        }
        let screened = Judge::screen_answer(
            text,
            reason == StopReason::Truncated,
            &names,
            self.ledger.this_turn(),
        );
        let (why, trip) = match screened {
            Screened::Answer(text) => return State::End(End::Answered { reason, text }),
            Screened::Unanswered(why, trip) => (why, trip),
        };
        match self.judge.reask(why) {
            Some((note, asked)) => {
                self.announce(asked).await;
                self.ledger.push(Message::note(note)).await;
                State::CallModel(CallPurpose::Reask)
            }
            None => {
                // No more asking: buddy writes the answer from the tool results.
                if let Some(trip) = trip {
                    self.announce(trip).await;
                }
                State::End(End::Answered {
                    reason,
                    text: String::new(),
                })
            }
        }
    }

    /// Puts the model's call message into the history; the tape points at it, unless
    /// buddy changed the calls (`raw` holds them as the model sent them).
    async fn push_calls(
        &mut self,
        text: &str,
        calls: Vec<ToolCall>,
        tape_step: usize,
        raw: Option<Vec<ToolCall>>,
    ) {
        let settled = match raw {
            Some(raw) => TapeCalls::Inline(raw),
            None => TapeCalls::Message(self.ledger.new_count()),
        };
        self.tape.settle_calls(tape_step, settled);
        self.ledger
            .push(Message::Assistant {
                content: non_empty(text.to_owned()),
                tool_calls: calls,
            })
            .await;
    }

    /// The model called `finish` with its answer: the call and its result join the
    /// history, and the answer ends the turn.
    async fn finish_call(&mut self, text: String, call: ToolCall, answer: String) -> State {
        debug!("the model called finish");
        self.ledger
            .push(Message::Assistant {
                content: non_empty(text),
                tool_calls: vec![call.clone()],
            })
            .await;
        self.emit_call_start(&call).await;
        self.events
            .emit(ChatEvent::ToolCallResult {
                id: call.id.clone(),
                name: call.name.clone(),
                content: words::FINISH_ACK.to_owned(),
                is_error: false,
            })
            .await;
        self.ledger
            .push(Message::tool_result(call.id, words::FINISH_ACK, false))
            .await;
        self.events
            .emit(ChatEvent::TextDelta {
                text: answer.clone(),
            })
            .await;
        State::End(End::Answered {
            reason: StopReason::FinishTool,
            text: answer,
        })
    }

    /// The Wait step: the pause is recorded — the call message with no results is the
    /// durable pause — and the turn ends waiting.
    pub(super) async fn wait(&mut self, wait: Wait) -> State {
        match wait {
            Wait::Approval {
                text,
                calls,
                raw,
                waiting,
                tape_step,
            } => {
                self.push_calls(&text, calls, tape_step, raw).await;
                if let Some(failure) = self.ledger.take_record_failure() {
                    return State::End(store_failed(failure));
                }
                self.events
                    .emit(ChatEvent::ApprovalRequired { calls: waiting })
                    .await;
                State::End(End::Paused {
                    reason: StopReason::ApprovalRequired,
                    text,
                })
            }
            Wait::Client {
                text,
                calls,
                raw,
                tape_step,
            } => {
                // Server-side calls beside client calls are dropped: the client could not
                // send their results back.
                let toolbox = self.toolbox_handle();
                let all_external = calls.iter().all(|c| toolbox.is_external(&c.name));
                let raw = match raw {
                    None if !all_external => Some(calls.clone()),
                    raw => raw,
                };
                let external: Vec<ToolCall> = calls
                    .into_iter()
                    .filter(|c| toolbox.is_external(&c.name))
                    .collect();
                if !all_external {
                    debug!("server-side calls beside client calls were not run");
                }
                self.push_calls(&text, external.clone(), tape_step, raw)
                    .await;
                for call in &external {
                    self.emit_call_start(call).await;
                }
                State::End(End::Paused {
                    reason: StopReason::ClientToolCalls,
                    text,
                })
            }
        }
    }
}
