//! ExecuteTools: run one reply's calls as the judge plans them, concurrently, and put
//! their results into the history in call order, byte for byte as the skills returned
//! them. buddy's own words for the model (loop warnings, calls left) follow in a note of
//! their own.

use buddy_core::{
    CallPurpose, ChatEvent, Message, RepeatSemantics, SkillContext, StopReason, ToolCall,
    ToolOutcome,
};
use std::sync::Arc;

use buddy_core::BoxFuture;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::{End, Round, State, ToolboxHandle, Turn};
use crate::agents::{Scope, as_line};
use crate::budget::TurnCallBudget;
use crate::calls::poll::{PollWatch, Polled, poll_until_changed};
use crate::calls::progress::CallProgress;
use crate::judge::{FinalizeCause, Judge, Plan, RoundFacts, RoundJudge, Slot};
use crate::tape::TapeStep;
use crate::words::not_run;

/// Why running stopped before every call had a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Interrupted {
    Cancelled,
    Deadline,
}

impl Turn<'_> {
    /// The ExecuteTools step.
    pub(super) async fn execute_tools(&mut self, round: Round) -> State {
        let Round {
            text,
            calls,
            mut decided,
            notes,
            then,
        } = round;
        let mut judged = self.judge.begin_round(&text, notes);
        for call in &calls {
            self.emit_call_start(call).await;
        }
        let semantics: Vec<Option<RepeatSemantics>> = {
            let toolbox = self.toolbox();
            calls.iter().map(|c| toolbox.semantics(&c.name)).collect()
        };
        // Drawn for every call before planning, the unplanned given back right after
        // (no await between): the judge's tree gate plans within what was drawn.
        let drawn = self
            .lease
            .take_tool_calls(u32::try_from(calls.len()).unwrap_or(u32::MAX));
        let facts = RoundFacts {
            tool_calls_so_far: self.stats.tool_calls,
            tools_offered: self.tools_offered_now,
            approval: &self.approval,
            tree_tool_calls: drawn,
        };
        let (slots, trips) =
            self.judge
                .plan_round(&mut judged, calls, &semantics, &mut decided, facts);
        let runs = slots.iter().filter(|s| matches!(s.plan, Plan::Run)).count();
        self.lease
            .give_back_tool_calls(drawn.saturating_sub(u32::try_from(runs).unwrap_or(u32::MAX)));
        self.announce_all(trips).await;

        let (interrupted, poll_notes) = self.run_slots(&slots, &mut judged).await;

        let names = self.tool_names();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let verdict = self.judge.end_round(
            judged,
            interrupted.is_some(),
            self.stats.model_calls,
            &names,
        );
        let notes: Vec<String> = poll_notes
            .into_iter()
            .chain(self.elicitation.take_notes())
            .chain(verdict.notes)
            .collect();
        if !notes.is_empty() {
            self.ledger.push(Message::note(notes.join("\n"))).await;
        }
        if let Some(message) = verdict.fatal {
            return State::End(End::Failed {
                reason: StopReason::SkillFailed,
                message,
            });
        }
        match interrupted {
            Some(Interrupted::Cancelled) => return State::End(End::Cancelled),
            Some(Interrupted::Deadline) => {
                return State::Finalize(FinalizeCause::deadline(self.judge.policy().deadline_ms));
            }
            None => {}
        }
        match verdict.cause.or(then) {
            Some(cause) => {
                tracing::debug!(reason = %cause.reason, detail = %cause.detail, "finalize after the tool round");
                State::Finalize(cause)
            }
            None => State::CallModel(CallPurpose::Turn),
        }
    }

    /// The scope handed to sub-agent calls of this round: the turn's place in its tree,
    /// the round's cancellation (`round`), stream, deadline, policy and latest messages.
    fn agent_scope(&self, round: &CancellationToken) -> Arc<Scope> {
        let messages = self.ledger.messages();
        let from = messages
            .len()
            .saturating_sub(usize::try_from(crate::agents::MAX_HISTORY).unwrap_or(0));
        Arc::new(Scope {
            place: self.lease.place(),
            cancel: round.clone(),
            events: self.events.sender(),
            observer: self.events.observer_arc(),
            deadline: self.deadline,
            policy: self.judge.policy().clone(),
            model: self.model.clone(),
            price: self.price,
            call_slots: self.call_slots.clone(),
            prices: self.prices.clone(),
            task_log: self.task_log.clone(),
            clock: self.clock.clone(),
            recent: messages[from..].iter().filter_map(as_line).collect(),
        })
    }

    /// The futures of the calls about to run, in call order: each with its context (a
    /// sub-agent's scope for agents; its progress sink, its share of the turn's budget),
    /// a repeated pollable one checked again by buddy; and their progress sinks. A call
    /// that fails fatally cancels `round`, and with it the calls still running beside it:
    /// a sub-agent ends with its work so far, another call with an error result.
    #[allow(clippy::type_complexity)]
    fn start_calls<'t>(
        &self,
        toolbox: &'t ToolboxHandle<'_>,
        to_run: &'t [(ToolCall, Option<PollWatch>)],
        round: &CancellationToken,
    ) -> (
        Vec<BoxFuture<'t, (ToolOutcome, Option<Polled>)>>,
        Vec<Arc<CallProgress>>,
    ) {
        let observer = self.events.observer();
        let mut scope = None;
        let mut pending: Vec<BoxFuture<'t, (ToolOutcome, Option<Polled>)>> = Vec::new();
        let mut sinks = Vec::new();
        for (call, watch) in to_run {
            let scope = match toolbox.is_agent(&call.name) {
                true => Some(Arc::clone(
                    scope.get_or_insert_with(|| self.agent_scope(round)),
                )),
                false => None,
            };
            let progress = CallProgress::new(call, self.events.sender());
            sinks.push(Arc::clone(&progress));
            let ctx = SkillContext {
                call_id: call.id.clone(),
                arguments: call.arguments.clone(),
                traceparent: observer.and_then(|o| o.tool_traceparent(&call.id)),
                elicitor: Some(self.elicitation.for_call(&call.id)),
                progress: Some(Arc::clone(&progress) as Arc<dyn buddy_core::ProgressSink>),
                budget: Some(Arc::new(TurnCallBudget {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    place: self.lease.place(),
                    used: self.side_usage.clone(),
                    events: self.events.sender(),
                    price: self.price,
                    slots: self.call_slots.clone(),
                    pricing: crate::budget::SamplingPrices {
                        table: self.prices.clone(),
                        provider: self.provider.name().to_owned(),
                        model: self.model.clone(),
                    },
                    held: std::sync::Mutex::default(),
                })),
                tasks: self
                    .task_log
                    .as_ref()
                    .map(|log| log.for_call(&call.name).unwrap_or_else(|| Arc::clone(log))),
            };
            let agent = scope.is_some();
            let call_future: BoxFuture<'t, (ToolOutcome, Option<Polled>)> =
                match (watch.clone(), scope) {
                    (Some(watch), _) => Box::pin(poll_until_changed(
                        call,
                        watch,
                        self.events.sender(),
                        self.clock.clone(),
                        move || toolbox.invoke(call, ctx.clone()),
                    )),
                    // A sub-agent runs with the calling turn as its scope.
                    (None, Some(scope)) => Box::pin(Scope::around(scope, async move {
                        (toolbox.invoke(call, ctx).await, None)
                    })),
                    (None, None) => {
                        Box::pin(async move { (toolbox.invoke(call, ctx).await, None) })
                    }
                };
            pending.push(Box::pin(within_round(call_future, round.clone(), agent)));
        }
        (pending, sinks)
    }

    /// Runs the `Run` slots concurrently (bounded), emitting and recording every result
    /// in call order. Calls still running when the turn is cancelled or its deadline
    /// passes get an error result, so the history stays valid.
    ///
    /// A `pollable` call that repeats an earlier action is checked again by buddy while its
    /// result stays the same (`poll.rs`); what the model is told about such waits comes
    /// back beside the interruption, as notes for after the results.
    async fn run_slots(
        &mut self,
        slots: &[Slot],
        judged: &mut RoundJudge,
    ) -> (Option<Interrupted>, Vec<String>) {
        let toolbox = self.toolbox_handle();
        let cancel = self.cancel.clone();
        let deadline = self.deadline;
        let parallel = usize::try_from(self.judge.policy().max_parallel_tools)
            .unwrap_or(1)
            .max(1);
        // Collected first so the stream holds no closures across awaits (keeps the future Send).
        let to_run: Vec<(ToolCall, Option<PollWatch>)> = slots
            .iter()
            .filter(|s| matches!(s.plan, Plan::Run))
            .map(|s| (s.call.clone(), self.judge.poll_watch(s)))
            .collect();
        // Cancelled with the turn, or by a call of the round that fails fatally.
        let round = self.cancel.child_token();
        let (pending, sinks) = self.start_calls(&toolbox, &to_run, &round);
        let mut sinks = sinks.into_iter();
        let mut running = futures::stream::iter(pending).buffered(parallel);
        let deadline_passed = crate::deadline::passed(deadline);
        tokio::pin!(deadline_passed);
        let mut interrupted = None;
        let mut poll_notes = Vec::new();
        let mut results: Vec<(String, bool)> = Vec::with_capacity(slots.len());
        for slot in slots {
            let mut ran = None;
            let (content, is_error) = match (&slot.plan, interrupted) {
                (Plan::Answer { content, is_error }, _) => {
                    Judge::not_run(judged, slot, content, *is_error);
                    (content.clone(), *is_error)
                }
                (Plan::SameAs(first), _) => results
                    .get(*first)
                    .cloned()
                    .unwrap_or_else(|| (not_run::SAME_CALL_UNFINISHED.to_owned(), true)),
                (Plan::Run, Some(why)) => (unfinished(why).to_owned(), true),
                (Plan::Run, None) => {
                    let next = tokio::select! {
                        biased;
                        _ = cancel.cancelled() => Err(Interrupted::Cancelled),
                        _ = &mut deadline_passed => Err(Interrupted::Deadline),
                        outcome = running.next() => Ok(outcome),
                    };
                    match next {
                        Ok(Some((outcome, polled))) => {
                            if let Some(polled) = polled {
                                poll_notes.push(crate::calls::poll::note(&slot.call, &polled));
                            }
                            self.stats.tool_calls += 1;
                            self.lease.book(&self.stats);
                            let trips = self.judge.observe(judged, slot, &outcome);
                            self.announce_all(trips).await;
                            ran = Some(outcome.fatal);
                            (outcome.content, outcome.is_error)
                        }
                        Ok(None) => (not_run::MISSING.to_owned(), true),
                        Err(why) => {
                            interrupted = Some(why);
                            self.tape.steps.push(TapeStep::Interrupted {
                                cause: match why {
                                    Interrupted::Cancelled => crate::tape::Interruption::Cancelled,
                                    Interrupted::Deadline => crate::tape::Interruption::Deadline,
                                },
                            });
                            (unfinished(why).to_owned(), true)
                        }
                    }
                }
            };
            if matches!(slot.plan, Plan::Run)
                && let Some(sink) = sinks.next()
            {
                // Its last progress goes before its result, none after.
                sink.finish().await;
            }
            let call = &slot.call;
            self.events
                .emit(ChatEvent::ToolCallResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    content: content.clone(),
                    is_error,
                })
                .await;
            if let Some(fatal) = ran {
                self.tape.steps.push(TapeStep::Result {
                    call_id: call.id.clone(),
                    at: self.ledger.new_count(),
                    is_error,
                    fatal,
                });
            }
            self.ledger
                .push(Message::tool_result(
                    call.id.clone(),
                    content.clone(),
                    is_error,
                ))
                .await;
            results.push((content, is_error));
        }
        (interrupted, poll_notes)
    }
}

/// `call` as one call of a round: its fatal failure cancels `round`; cancelled by a
/// sibling's, it ends at once with an error result — unless it is a sub-agent (`agent`),
/// which ends by itself on the round's cancel, with its work so far.
async fn within_round<F>(
    call: F,
    round: CancellationToken,
    agent: bool,
) -> (ToolOutcome, Option<Polled>)
where
    F: std::future::Future<Output = (ToolOutcome, Option<Polled>)>,
{
    let run = async {
        let done = call.await;
        if done.0.fatal {
            round.cancel();
        }
        done
    };
    if agent {
        return run.await;
    }
    tokio::select! {
        biased;
        done = run => done,
        () = round.cancelled() => (ToolOutcome::error(not_run::SIBLING_FAILED), None),
    }
}

/// The result of a call the turn stopped waiting for.
fn unfinished(why: Interrupted) -> &'static str {
    match why {
        Interrupted::Cancelled => not_run::CANCELLED,
        Interrupted::Deadline => not_run::DEADLINE,
    }
}
