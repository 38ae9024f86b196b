//! CallModel: check the limits, choose the tools to offer (`offer.rs`), fit the request
//! to the model's window (`request.rs`, by the request budget of `context/budget.rs`),
//! make the call, and book the reply (`account.rs`) and record it on the tape.

use std::time::{Duration, Instant};

use buddy_core::{
    CallPurpose, ChatEvent, CompletionRequest, GuardAction, GuardKind, Message, ModelCallEnd,
    ProviderError, StopReason, ToolChoice, ToolSpec,
};
use tracing::warn;

use super::account::{CallAccount, reply_tokens, reported_input};
use super::request::ended_without_reply;
use super::{End, State, Turn, announce_to};
use crate::context::budget::{Budgeted, History, RequestParts, cap_after_refusal, fit_request};
use crate::guards::chant::ChantDetector;
use crate::judge::tree_cause;
use crate::judge::{FinalizeCause, Judge, Trip};
use crate::model_call::{CallEnd, Reply, stream_reply};
use crate::tape::{Interruption, TapeStep};

impl Turn<'_> {
    /// The CallModel step.
    pub(super) async fn call_model(&mut self, purpose: CallPurpose) -> State {
        if let Some(end) = self.stopped_before_call() {
            return State::End(end);
        }
        let estimate = self.next_call_estimate();
        self.lease.book(&self.stats);
        let tree = self
            .lease
            .stop_before_call(estimate)
            .or_else(|| (!self.lease.has_round_call()).then(|| self.lease.calls_spent()));
        let deadline_passed = self.deadline_passed();
        if let Some(cause) =
            self.judge
                .limit_before_call(&self.stats, deadline_passed, estimate, tree)
        {
            return State::Finalize(cause);
        }
        // A sibling may have drawn the tree's last call since the judge looked.
        if !self.lease.take_round_call() {
            return State::Finalize(tree_cause(self.lease.calls_spent()));
        }
        let tools = self.tools_for_next_call().await;
        self.tools_offered_now = tools.is_some();
        match self.model_call(tools.as_deref(), None, purpose).await {
            Ok(reply) => State::Route(reply),
            Err(end) => self.call_failed(end).await,
        }
    }

    /// Where a model call that produced no reply leaves the turn.
    async fn call_failed(&mut self, end: CallEnd) -> State {
        State::End(match end {
            CallEnd::Cancelled(_) => End::Cancelled,
            CallEnd::Deadline => {
                return State::Finalize(FinalizeCause::deadline(self.judge.policy().deadline_ms));
            }
            CallEnd::Invalid(e) => End::Failed {
                reason: StopReason::InvalidRequest,
                message: e.to_string(),
            },
            CallEnd::Overflow(message) => End::Failed {
                reason: StopReason::ContextOverflow,
                message,
            },
            CallEnd::ContextRefused(e) => self.context_refused(&e),
            // The server's own loop guard: another request with this history fails the
            // same way, so the turn asks for its answer without the repeated rounds.
            CallEnd::Provider(e) if e.is_repetition_refusal() => {
                // The refused request produced no reply: it takes no model call's number.
                self.stats.model_calls = self.stats.model_calls.saturating_sub(1);
                return State::Finalize(FinalizeCause::new(
                    StopReason::ProviderRefusedLoop,
                    GuardKind::ProviderLoopRefusal,
                    format!(
                        "the model server refused the conversation for repeating tool calls ({e}); the \
                         final answer is asked for without the repeated rounds"
                    ),
                ));
            }
            CallEnd::Provider(e) => End::Failed {
                reason: StopReason::ProviderError,
                message: e.to_string(),
            },
            CallEnd::NoRoom(why) => return self.no_room(why, StopReason::CostBudget).await,
        })
    }

    /// The key's ledger had no room for the next call: it was not made (it takes no
    /// number), and the turn ends (for its cost, or for the `reason` it was finalizing
    /// for) with an answer from what it has.
    pub(super) async fn no_room(&mut self, why: String, reason: StopReason) -> State {
        self.stats.model_calls = self.stats.model_calls.saturating_sub(1);
        self.announce(Trip::new(
            GuardKind::CostBudget,
            GuardAction::ComposedAnswer,
            why,
        ))
        .await;
        State::End(End::Answered {
            reason,
            text: String::new(),
        })
    }

    /// The provider refused the request as too long twice: answer from the tool results
    /// if there are any, else end with an error that says what to change.
    fn context_refused(&self, e: &ProviderError) -> End {
        warn!(error = %e, "the provider refused the request as too long, even trimmed");
        if Judge::has_successful_results(self.ledger.this_turn()) {
            return End::Answered {
                reason: StopReason::ContextOverflow,
                text: String::new(),
            };
        }
        End::Failed {
            reason: StopReason::ContextOverflow,
            message: format!(
                "{e}; buddy trimmed the history and retried, and it still does not fit: set the model's \
                 context_window in the policy, or shorten the message or system prompt"
            ),
        }
    }

    /// One model call over the history (plus a Finalize instruction, if given), fitted
    /// to the model's context window first. When the provider refuses the request as too
    /// long for its window (buddy's estimate was low for this model), the room is cut to
    /// 60 % of what was sent, for the rest of the turn, and the call is made once more.
    pub(super) async fn model_call(
        &mut self,
        tools: Option<&[ToolSpec]>,
        finalize_instruction: Option<&str>,
        purpose: CallPurpose,
    ) -> Result<Reply, CallEnd> {
        let mut retried = false;
        loop {
            let result = self
                .model_call_once(tools, finalize_instruction, purpose)
                .await;
            // Booked at once: a sub-agent dropped by its caller's cancel still counts.
            self.lease.book(&self.stats);
            let result = match result {
                // The text streamed before the cancel stays the turn's (see `end`).
                Err(CallEnd::Cancelled(partial)) => {
                    self.partial_reply = partial;
                    Err(CallEnd::Cancelled(String::new()))
                }
                other => other,
            };
            match &result {
                Err(CallEnd::Provider(e)) => self.tape.steps.push(TapeStep::failed(purpose, e)),
                Err(CallEnd::Cancelled(_)) => self.tape.steps.push(TapeStep::Interrupted {
                    cause: Interruption::Cancelled,
                }),
                Err(CallEnd::Deadline) => self.tape.steps.push(TapeStep::Interrupted {
                    cause: Interruption::Deadline,
                }),
                _ => {}
            }
            match result {
                Err(CallEnd::Provider(e)) if e.is_context_length() => {
                    if retried {
                        return Err(CallEnd::ContextRefused(e));
                    }
                    retried = true;
                    // The refused request produced no reply; the retry takes its number.
                    self.stats.model_calls = self.stats.model_calls.saturating_sub(1);
                    if std::mem::take(&mut self.window.last_sent_bounded) {
                        let instruction = finalize_instruction
                            .map_or(0, |i| self.ledger.counter().message(&Message::note(i)));
                        self.window.last_sent_tokens =
                            self.exact_request(tools, instruction) as u64;
                    }
                    let cap = cap_after_refusal(self.window.last_sent_tokens);
                    self.window.room.cap = Some(cap);
                    let detail = format!(
                        "the provider refused the request as too long for the model's context ({e}); buddy \
                         trims the history to {cap} estimated tokens and retries once"
                    );
                    self.announce(Trip::new(
                        GuardKind::ContextWindow,
                        GuardAction::Trimmed,
                        detail,
                    ))
                    .await;
                }
                other => return other,
            }
        }
    }

    /// One model call: the request sized, fitted to the window and checked, the reply
    /// streamed, then booked.
    async fn model_call_once(
        &mut self,
        tools: Option<&[ToolSpec]>,
        finalize_instruction: Option<&str>,
        purpose: CallPurpose,
    ) -> Result<Reply, CallEnd> {
        let instruction = finalize_instruction.map(Message::note);
        let instruction_tokens = instruction
            .as_ref()
            .map_or(0, |m| self.ledger.counter().message(m));
        let (full_tools_tokens, bounded) = self.size_request(tools, instruction_tokens);
        let parts = RequestParts {
            history: History {
                messages: self.ledger.messages(),
                counts: self.ledger.counts(),
                tokens: self.ledger.tokens(),
            },
            tools,
            tools_tokens: full_tools_tokens,
            instruction_tokens,
            floor: self.window.trim_floor,
        };
        let budgeted = fit_request(parts, self.room(), self.ledger.counter())
            .map_err(|o| CallEnd::Overflow(self.overflow_message(&o.overflow, o.tools_tokens)))?;
        for trip in self.fit_trips(&budgeted, full_tools_tokens) {
            announce_to(&self.events, &mut self.tape, self.stats.model_calls, trip).await;
        }
        let Budgeted {
            fitted,
            tools,
            tokens: context_tokens,
            floor,
            ..
        } = budgeted;
        self.window.trim_floor = floor;
        // A client's cache breakpoints name messages of the whole history: they go only
        // with a request that sends it whole (a trimmed one has lost their prefix anyway).
        let whole = matches!(fitted.messages, std::borrow::Cow::Borrowed(_)) && !self.prune_repeats;
        let messages = self.request_messages(fitted.messages, instruction)?;
        self.window.last_sent_tokens = context_tokens as u64;
        self.window.last_sent_bounded = bounded;
        let finalize = finalize_instruction.is_some();
        let result = self
            .stream(
                &messages,
                tools.as_deref(),
                (finalize, purpose, whole),
                context_tokens,
            )
            .await;
        drop(messages);
        self.stats.model_calls += 1;
        let reply = match result {
            Ok(reply) => reply,
            Err(end) => {
                if let Some(observer) = self.events.observer() {
                    observer.model_call_ended(&ended_without_reply(&end));
                }
                return Err(end);
            }
        };
        let sized = Sized {
            bounded,
            instruction_tokens,
            context_tokens,
        };
        Ok(self
            .book_reply(reply, purpose, tools.as_deref(), finalize, sized)
            .await)
    }

    /// Sends `messages` and `tools` and streams the reply. The Finalize call has its own
    /// short grace, so that a turn past its deadline (or a server that never ends a
    /// reply) still ends by deadline + grace. `whole`: `messages` begin with the whole
    /// history, so a client's cache breakpoints on it go too.
    async fn stream(
        &self,
        messages: &[Message],
        tools: Option<&[ToolSpec]>,
        (finalize, purpose, whole): (bool, CallPurpose, bool),
        input_tokens: usize,
    ) -> Result<Reply, CallEnd> {
        let policy = self.judge.policy();
        let mut request = CompletionRequest {
            model: &self.model,
            messages,
            tools,
            tool_choice: tools.filter(|_| finalize).map(|_| ToolChoice::None),
            max_output_tokens: self.sampling.max_output_tokens,
            purpose,
            traceparent: None,
            tracestate: None,
            sampling: (!self.sampling.is_default()).then_some(&self.sampling),
            cache_key: Some(&self.cache_key),
            cache_marks: if whole { &self.cache_marks } else { &[] },
        };
        let trace = self
            .events
            .observer()
            .and_then(|o| o.model_call_started(&request));
        request.traceparent = trace.as_ref().map(|t| t.traceparent.as_str());
        request.tracestate = trace.as_ref().and_then(|t| t.tracestate.as_deref());
        let deadline = if finalize {
            Some(Instant::now() + Duration::from_millis(policy.finalize_grace_ms))
        } else {
            self.deadline
        };
        let chant = policy.chant_repeats.map(|repeats| {
            ChantDetector::new(
                policy.chant_min_chars,
                usize::try_from(repeats).unwrap_or(usize::MAX),
            )
        });
        let worst = crate::CallWorst {
            input_tokens: input_tokens as u64,
            max_output_tokens: request.max_output_tokens,
            price: self.price,
        };
        stream_reply(
            self.provider,
            self.call_slots.as_ref(),
            &self.events,
            &self.cancel,
            deadline,
            chant,
            request,
            worst,
        )
        .await
    }

    /// Books a reply: its account (the provider's usage, else buddy's exact count of
    /// what was only bounded), the tape, the stats, the observer and the iteration event.
    async fn book_reply(
        &mut self,
        mut reply: Reply,
        purpose: CallPurpose,
        tools: Option<&[ToolSpec]>,
        finalize: bool,
        sized: Sized,
    ) -> Reply {
        let counted = match reported_input(reply.usage) {
            None if sized.bounded => self.exact_request(tools, sized.instruction_tokens),
            _ => sized.context_tokens,
        };
        let counter = self.ledger.counter();
        let account = CallAccount::new(
            reply.usage,
            counted,
            || reply_tokens(counter, &reply.text, &reply.tool_calls),
            self.price,
        );
        reply.tape_step = self.tape.reply(
            purpose,
            &reply.text,
            reply.finish.clone(),
            reply.usage,
            reply.chanted.clone(),
        );
        account.charge(&mut self.stats);
        if let Some(cost) = account.cost {
            self.last_call_cost = Some(cost);
        }
        if let Some(observer) = self.events.observer() {
            observer.model_call_ended(&ModelCallEnd {
                text: &reply.text,
                tool_calls: &reply.tool_calls,
                finish: reply.finish.as_ref(),
                usage: Some(account.usage),
                cost: account.cost,
                error: None,
                message: None,
            });
        }
        self.events
            .emit(ChatEvent::IterationStats {
                model_call: self.stats.model_calls,
                finish_reason: reply.finish.clone(),
                tool_calls_requested: u32::try_from(reply.tool_calls.len()).unwrap_or(u32::MAX),
                tools_offered: match (finalize, tools) {
                    (false, Some(t)) => u32::try_from(t.len()).unwrap_or(u32::MAX),
                    _ => 0,
                },
                input_tokens: self.stats.input_tokens,
                output_tokens: self.stats.output_tokens,
                context_tokens: account.context_tokens,
                context_window: self.window.room.window,
                elapsed_ms: self.elapsed_ms(),
                cost_usd: account.cost,
            })
            .await;
        reply
    }
}

/// How a sent request was sized, for booking its reply.
#[derive(Clone, Copy, Debug)]
struct Sized {
    /// The size was only an upper bound.
    bounded: bool,
    instruction_tokens: usize,
    /// The request's tokens as fitted.
    context_tokens: usize,
}
