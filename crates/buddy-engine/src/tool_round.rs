//! ExecuteTools: run one response's tool calls through the guards, concurrently, and
//! put their results into the history in call order.

use buddy_core::{
    ChatEvent, GuardAction, GuardKind, Message, RepeatSemantics, SkillContext, StopReason,
    ToolCall, ToolOutcome,
};
use futures::StreamExt;

use crate::finalize::FINISH_TOOL;
use crate::guards::call_log::{CallRecord, call_key};
use crate::guards::canonical::canonical_args;
use crate::guards::ladder::Rung;
use crate::guards::similarity::{NEAR_ANSWER, args_near, normalize, results_near, text_similarity};
use crate::turn::{FinalizeCause, Step, Turn};

/// What the round does with one call.
enum Plan {
    Run,
    Answer { content: String, is_error: bool },
}

struct Slot {
    call: ToolCall,
    canonical: String,
    key: String,
    semantics: Option<RepeatSemantics>,
    plan: Plan,
    /// A loop signal seen before running (repetition, cycle, withdrawn skill called).
    signal: Option<GuardKind>,
    /// For a repeat: the earlier result and whether it was an error.
    earlier: Option<(String, bool)>,
    /// For a cycle: every skill taking part in it.
    cycle: Vec<String>,
}

/// Why running stopped before every call had a result.
enum Interrupted {
    Cancelled,
    Deadline,
}

/// State of one round that the per-call checks share.
#[derive(Default)]
struct Round {
    /// The ladder rung this round reached; set at most once per round.
    rung: Option<Rung>,
    cause: Option<FinalizeCause>,
    fatal: Option<String>,
}

impl Round {
    fn set_cause(&mut self, cause: FinalizeCause) {
        let replace = match &self.cause {
            None => true,
            Some(existing) => {
                cause.reason == StopReason::LoopDetected
                    && existing.reason != StopReason::LoopDetected
            }
        };
        if replace {
            self.cause = Some(cause);
        }
    }
}

fn refused(content: String) -> Plan {
    Plan::Answer {
        content,
        is_error: true,
    }
}

fn loop_cause(detail: String) -> FinalizeCause {
    FinalizeCause {
        reason: StopReason::LoopDetected,
        guard: GuardKind::RepeatedAnswer,
        detail,
    }
}

impl Turn<'_> {
    /// Runs the calls of one model response and decides where the turn goes next.
    pub(crate) async fn tool_round(&mut self, calls: Vec<ToolCall>, text: &str) -> Step {
        let mut round = Round::default();
        let loop_on = self.policy.loop_detection;
        let text_repeated = loop_on && self.answer_repeats(text);
        for call in &calls {
            self.emit_call_start(call).await;
        }
        let mut slots = self.plan_calls(calls, &mut round).await;

        if text_repeated || slots.iter().any(|s| s.signal.is_some()) {
            let rung = self.guards.ladder.step();
            round.rung = Some(rung);
            self.apply_pre_run_rung(rung, &mut slots, text_repeated, &mut round)
                .await;
        }

        let interrupted = self.run_slots(&slots, &mut round).await;

        if round.rung.is_none() {
            self.guards.ladder.clean_round();
        }
        let normalized = normalize(text);
        if normalized.chars().count() >= self.policy.repeated_answer_min_chars {
            self.guards.answers.push(normalized);
        }
        if let Some(message) = round.fatal {
            return Step::Done(self.finish_error(StopReason::SkillFailed, message).await);
        }
        match interrupted {
            Some(Interrupted::Cancelled) => return Step::Done(self.finish_cancelled().await),
            Some(Interrupted::Deadline) => return Step::Finalize(self.deadline_cause()),
            None => {}
        }
        if let Some(cause) = round.cause {
            return Step::Finalize(cause);
        }
        let specs = self.toolbox.specs();
        if !specs.is_empty()
            && specs
                .iter()
                .all(|s| self.guards.withdrawn.contains_key(&s.name))
        {
            let guard = self
                .guards
                .last_withdrawal_by
                .unwrap_or(GuardKind::CircuitBreaker);
            let reason = if is_loop_guard(guard) {
                StopReason::LoopDetected
            } else {
                StopReason::ToolsExhausted
            };
            return Step::Finalize(FinalizeCause {
                reason,
                guard,
                detail: "every tool has been withdrawn".to_owned(),
            });
        }
        Step::Continue
    }

    /// True when `text` says what an earlier round beside tool calls already said.
    fn answer_repeats(&self, text: &str) -> bool {
        let normalized = normalize(text);
        normalized.chars().count() >= self.policy.repeated_answer_min_chars
            && self
                .guards
                .answers
                .iter()
                .any(|earlier| text_similarity(earlier, &normalized) >= NEAR_ANSWER)
    }

    /// Applies the checks that need no execution: limits, withdrawn skills, exact repeats.
    async fn plan_calls(&mut self, calls: Vec<ToolCall>, round: &mut Round) -> Vec<Slot> {
        let loop_on = self.policy.loop_detection;
        let mut slots: Vec<Slot> = Vec::with_capacity(calls.len());
        let mut planned_runs = 0u32;
        for call in calls {
            let canonical = canonical_args(&call.arguments);
            let key = call_key(&call.name, &canonical);
            let semantics = self.toolbox.semantics(&call.name);
            let name = call.name.clone();
            let mut slot = Slot {
                call,
                canonical,
                key,
                semantics,
                plan: Plan::Run,
                signal: None,
                earlier: None,
                cycle: Vec::new(),
            };
            let runs_of_skill = self.guards.calls_per_skill.get(&name).copied().unwrap_or(0)
                + u32::try_from(
                    slots
                        .iter()
                        .filter(|s| s.call.name == name && matches!(s.plan, Plan::Run))
                        .count(),
                )
                .unwrap_or(u32::MAX);
            if self.policy.finish_tool && name == FINISH_TOOL {
                slot.plan = refused(
                    "`finish` needs arguments {\"answer\": \"<your final answer>\"} with a non-empty answer".to_owned(),
                );
            } else if self.stats.tool_calls + planned_runs >= self.policy.max_tool_calls {
                let max = self.policy.max_tool_calls;
                slot.plan = refused(format!(
                    "not run: this turn's limit of {max} tool calls is reached"
                ));
                round.set_cause(FinalizeCause {
                    reason: StopReason::MaxToolCalls,
                    guard: GuardKind::ToolCallLimit,
                    detail: format!("{max} of {max} tool calls used"),
                });
            } else if let Some(why) = self.guards.withdrawn.get(&name) {
                slot.plan = refused(format!(
                    "not run: `{name}` is no longer available in this turn ({why}); answer with what you have"
                ));
                slot.signal = loop_on.then_some(GuardKind::WithdrawnSkillCalled);
            } else if !self.tools_offered_now {
                slot.plan = refused(
                    "not run: no tools are offered now; answer with what you have".to_owned(),
                );
                slot.signal = loop_on.then_some(GuardKind::WithdrawnSkillCalled);
            } else if let Some(limit) = self.policy.max_calls_per_skill
                && runs_of_skill >= limit
            {
                let why = format!("it reached its limit of {limit} calls in this turn");
                self.withdraw(&name, why.clone(), GuardKind::SkillCallLimit);
                self.emit_guard(
                    GuardKind::SkillCallLimit,
                    GuardAction::WithdrewSkill,
                    Some(&name),
                    why.clone(),
                )
                .await;
                slot.plan = refused(format!(
                    "not run: `{name}` is withdrawn: {why}; answer with what you have"
                ));
            } else if loop_on && !matches!(slot.semantics, Some(RepeatSemantics::Pollable)) {
                if let Some(earlier) = self.guards.log.last_with_key(&slot.key) {
                    slot.earlier = Some((earlier.result.clone(), earlier.is_error));
                    slot.cycle = self.guards.log.cycle_members(&slot.key);
                    slot.signal = Some(if self.guards.log.cycle_period(&slot.key).is_some() {
                        GuardKind::Cycle
                    } else {
                        GuardKind::Repetition
                    });
                } else if slots
                    .iter()
                    .any(|s| s.key == slot.key && matches!(s.plan, Plan::Run))
                {
                    slot.earlier = Some((
                        "(the same call appears earlier in this response)".to_owned(),
                        false,
                    ));
                    slot.signal = Some(GuardKind::Repetition);
                }
            }
            if matches!(slot.plan, Plan::Run) && slot.signal.is_none() {
                planned_runs += 1;
            }
            self.guards.log.note_requested(&slot.key);
            slots.push(slot);
        }
        slots
    }

    /// Decides what each signalled call gets at the rung this round reached.
    async fn apply_pre_run_rung(
        &mut self,
        rung: Rung,
        slots: &mut [Slot],
        text_repeated: bool,
        round: &mut Round,
    ) {
        for slot in slots.iter_mut() {
            let name = slot.call.name.clone();
            match slot.signal {
                Some(guard @ (GuardKind::Repetition | GuardKind::Cycle)) => {
                    let (earlier, earlier_error) = slot.earlier.clone().unwrap_or_default();
                    let what = if guard == GuardKind::Cycle {
                        format!(
                            "`{name}` was called again with the same arguments, in a cycle with other calls"
                        )
                    } else {
                        format!("`{name}` was called again with the same arguments")
                    };
                    match rung {
                        Rung::Note => {
                            slot.plan = Plan::Answer {
                                content: format!(
                                    "{earlier}\n\n[buddy: this exact call already ran in this turn and was not run again; \
                                     above is its earlier result. Use it, or answer the user.]"
                                ),
                                is_error: earlier_error,
                            };
                            self.emit_guard(
                                guard,
                                GuardAction::ReturnedEarlierResult,
                                Some(&name),
                                what,
                            )
                            .await;
                        }
                        Rung::Withdraw => {
                            // A cycle involves all its members: withdrawing one would leave the
                            // others to go on cycling.
                            if guard == GuardKind::Cycle {
                                for member in slot.cycle.clone() {
                                    if member != name {
                                        let why =
                                            "it kept being called in a cycle with other calls"
                                                .to_owned();
                                        self.withdraw(&member, why, guard);
                                        self.emit_guard(
                                            guard,
                                            GuardAction::WithdrewSkill,
                                            Some(&member),
                                            what.clone(),
                                        )
                                        .await;
                                    }
                                }
                            }
                            self.withdraw(
                                &name,
                                "it kept being called with the same arguments".to_owned(),
                                guard,
                            );
                            slot.plan = refused(format!(
                                "not run: {what}, so it is withdrawn for the rest of this turn. Its earlier result \
                                 was:\n{earlier}"
                            ));
                            self.emit_guard(guard, GuardAction::WithdrewSkill, Some(&name), what)
                                .await;
                        }
                        Rung::Finalize => {
                            slot.plan = refused(
                                "not run: buddy detected a loop and is asking for the final answer"
                                    .to_owned(),
                            );
                            round.set_cause(FinalizeCause {
                                reason: StopReason::LoopDetected,
                                guard,
                                detail: what,
                            });
                        }
                    }
                }
                Some(GuardKind::WithdrawnSkillCalled) => {
                    let what = format!("`{name}` was called although it is not offered");
                    if rung == Rung::Finalize {
                        round.set_cause(FinalizeCause {
                            reason: StopReason::LoopDetected,
                            guard: GuardKind::WithdrawnSkillCalled,
                            detail: what,
                        });
                    } else {
                        self.emit_guard(
                            GuardKind::WithdrawnSkillCalled,
                            GuardAction::Refused,
                            Some(&name),
                            what,
                        )
                        .await;
                    }
                }
                _ => {}
            }
        }
        if !text_repeated {
            return;
        }
        let what = "the same answer text came again beside new tool calls".to_owned();
        match rung {
            Rung::Note => {
                self.emit_guard(GuardKind::RepeatedAnswer, GuardAction::Warned, None, what)
                    .await;
            }
            Rung::Withdraw => {
                for slot in slots.iter_mut().filter(|s| matches!(s.plan, Plan::Run)) {
                    let name = slot.call.name.clone();
                    self.withdraw(
                        &name,
                        "the same answer kept coming with new calls to it".to_owned(),
                        GuardKind::RepeatedAnswer,
                    );
                    slot.plan = refused(format!(
                        "not run: {what}, so `{name}` is withdrawn for the rest of this turn. If your answer is \
                         complete, give it without calling tools."
                    ));
                    self.emit_guard(
                        GuardKind::RepeatedAnswer,
                        GuardAction::WithdrewSkill,
                        Some(&name),
                        what.clone(),
                    )
                    .await;
                }
            }
            Rung::Finalize => {
                for slot in slots.iter_mut().filter(|s| matches!(s.plan, Plan::Run)) {
                    slot.plan = refused(
                        "not run: buddy detected a loop and is asking for the final answer"
                            .to_owned(),
                    );
                }
                round.set_cause(loop_cause(what));
            }
        }
    }

    /// Runs the `Run` slots concurrently (bounded), emitting and recording every result
    /// in call order. Calls still running when the turn is cancelled or its deadline
    /// passes get an error result, so the history stays valid.
    async fn run_slots(&mut self, slots: &[Slot], round: &mut Round) -> Option<Interrupted> {
        let toolbox = self.toolbox;
        let cancel = self.cancel.clone();
        let deadline = self.deadline;
        let parallel = usize::try_from(self.policy.max_parallel_tools)
            .unwrap_or(1)
            .max(1);
        // Collected first so the stream holds no closures across awaits (keeps the future Send).
        let mut pending: Vec<buddy_core::BoxFuture<'_, ToolOutcome>> = Vec::new();
        for slot in slots.iter().filter(|s| matches!(s.plan, Plan::Run)) {
            let ctx = SkillContext {
                call_id: slot.call.id.clone(),
            };
            pending.push(toolbox.invoke(&slot.call, ctx));
        }
        let mut running = futures::stream::iter(pending).buffered(parallel);
        let deadline_passed = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => futures::future::pending().await,
            }
        };
        tokio::pin!(deadline_passed);
        let mut interrupted = None;
        for slot in slots {
            let (content, is_error) = match (&slot.plan, &interrupted) {
                (Plan::Answer { content, is_error }, _) => (content.clone(), *is_error),
                (Plan::Run, Some(Interrupted::Cancelled)) => {
                    ("not finished: the turn was cancelled".to_owned(), true)
                }
                (Plan::Run, Some(Interrupted::Deadline)) => {
                    ("not finished: the turn's deadline passed".to_owned(), true)
                }
                (Plan::Run, None) => {
                    let next = tokio::select! {
                        biased;
                        _ = cancel.cancelled() => Err(Interrupted::Cancelled),
                        _ = &mut deadline_passed => Err(Interrupted::Deadline),
                        outcome = running.next() => Ok(outcome),
                    };
                    match next {
                        Ok(Some(outcome)) => self.after_run(slot, outcome, round).await,
                        Ok(None) => (
                            "internal error: the tool result went missing".to_owned(),
                            true,
                        ),
                        Err(why) => {
                            let text = match why {
                                Interrupted::Cancelled => "not finished: the turn was cancelled",
                                Interrupted::Deadline => "not finished: the turn's deadline passed",
                            };
                            interrupted = Some(why);
                            (text.to_owned(), true)
                        }
                    }
                }
            };
            self.events
                .emit(ChatEvent::ToolCallResult {
                    id: slot.call.id.clone(),
                    name: slot.call.name.clone(),
                    content: content.clone(),
                    is_error,
                })
                .await;
            self.push(Message::tool_result(
                slot.call.id.clone(),
                content,
                is_error,
            ))
            .await;
        }
        interrupted
    }

    /// Books one executed call: counters, circuit breaker, post-run loop checks, notes.
    async fn after_run(
        &mut self,
        slot: &Slot,
        outcome: ToolOutcome,
        round: &mut Round,
    ) -> (String, bool) {
        let name = slot.call.name.as_str();
        self.stats.tool_calls += 1;
        *self
            .guards
            .calls_per_skill
            .entry(name.to_owned())
            .or_default() += 1;
        let mut notes: Vec<String> = Vec::new();
        if outcome.fatal {
            round.fatal = Some(format!(
                "skill `{name}` failed fatally: {}",
                outcome.content
            ));
        }

        if outcome.is_error {
            let failures = self
                .guards
                .consecutive_failures
                .entry(name.to_owned())
                .or_default();
            *failures += 1;
            let failures = *failures;
            if failures >= self.policy.max_consecutive_failures
                && !self.guards.withdrawn.contains_key(name)
            {
                let why = format!("it failed {failures} times in a row");
                self.withdraw(name, why.clone(), GuardKind::CircuitBreaker);
                self.emit_guard(
                    GuardKind::CircuitBreaker,
                    GuardAction::WithdrewSkill,
                    Some(name),
                    why,
                )
                .await;
                notes.push(format!(
                    "[buddy: `{name}` failed {failures} times in a row and is withdrawn for the rest of this turn; \
                     answer with what you have.]"
                ));
            }
        } else {
            self.guards.consecutive_failures.insert(name.to_owned(), 0);
        }

        let mut unchanged_polls = 0;
        if self.policy.loop_detection && !outcome.is_error {
            let mut signal: Option<(GuardKind, String)> = None;
            if slot.semantics == Some(RepeatSemantics::Pollable)
                && let Some(prev) = self.guards.log.last_with_key(&slot.key)
                && prev.result == outcome.content
            {
                unchanged_polls = prev.unchanged_polls + 1;
                if unchanged_polls > self.policy.poll_patience {
                    signal = Some((
                        GuardKind::Repetition,
                        format!(
                            "`{name}` returned the same result {} times in a row",
                            unchanged_polls + 1
                        ),
                    ));
                }
            }
            if signal.is_none()
                && let Some(prev) = self.guards.log.last_of(name)
                && prev.key != slot.key
                && !prev.is_error
                && args_near(&prev.canonical_args, &slot.canonical)
                && results_near(&prev.result, &outcome.content)
            {
                signal = Some((
                    GuardKind::NearDuplicate,
                    format!(
                        "`{name}` was called with slightly changed arguments and returned the same result"
                    ),
                ));
            }
            if let Some((guard, what)) = signal {
                let rung = *round.rung.get_or_insert_with(|| self.guards.ladder.step());
                match rung {
                    Rung::Note => {
                        notes.push(format!(
                            "[buddy: {what}. Changing the arguments this way will not help; use what you have.]"
                        ));
                        self.emit_guard(guard, GuardAction::Warned, Some(name), what)
                            .await;
                    }
                    Rung::Withdraw => {
                        self.withdraw(name, what.clone(), guard);
                        notes.push(format!(
                            "[buddy: {what}, so it is withdrawn for the rest of this turn.]"
                        ));
                        self.emit_guard(guard, GuardAction::WithdrewSkill, Some(name), what)
                            .await;
                    }
                    Rung::Finalize => round.set_cause(FinalizeCause {
                        reason: StopReason::LoopDetected,
                        guard,
                        detail: what,
                    }),
                }
            }
        }

        self.guards.log.push(CallRecord {
            name: name.to_owned(),
            key: slot.key.clone(),
            canonical_args: slot.canonical.clone(),
            result: outcome.content.clone(),
            is_error: outcome.is_error,
            unchanged_polls,
        });

        let max = self.policy.max_model_calls;
        if self.policy.show_budget && self.stats.model_calls * 2 >= max {
            let left = max.saturating_sub(self.stats.model_calls);
            notes.push(format!(
                "[buddy: {left} of {max} model calls left in this turn; the last is reserved for your answer.]"
            ));
        }
        let mut content = outcome.content;
        for note in notes {
            content.push_str("\n\n");
            content.push_str(&note);
        }
        (content, outcome.is_error)
    }

    /// Stops offering `name` for the rest of the turn, remembering which guard did it.
    fn withdraw(&mut self, name: &str, why: String, by: GuardKind) {
        self.guards.withdrawn.insert(name.to_owned(), why);
        self.guards.last_withdrawal_by = Some(by);
    }
}

/// Guards that detect loops (as opposed to limits and failures).
fn is_loop_guard(guard: GuardKind) -> bool {
    matches!(
        guard,
        GuardKind::Repetition
            | GuardKind::Cycle
            | GuardKind::NearDuplicate
            | GuardKind::RepeatedAnswer
            | GuardKind::WithdrawnSkillCalled
    )
}
