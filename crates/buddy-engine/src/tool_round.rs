//! ExecuteTools: run one response's tool calls through the guards, concurrently, and
//! put their results into the history in call order, byte for byte as the skills
//! returned them. buddy's own words for the model (loop warnings, calls left) follow in
//! a note of their own.

use buddy_core::{
    ChatEvent, Evidence, GuardAction, GuardKind, Message, RepeatSemantics, SkillContext,
    StopReason, ToolCall, ToolOutcome,
};
use futures::StreamExt;

use crate::approval::{rejected_result, unattended_result};
use crate::finalize::FINISH_TOOL;
use crate::guards::call_log::{CallRecord, call_key};
use crate::guards::canonical::canonical_args;
use crate::guards::ladder::Rung;
use crate::guards::similarity::{
    NEAR_ANSWER, arg_strings, args_near, normalize, same_result, text_similarity,
};
use crate::turn::{FinalizeCause, Step, Turn};

/// What the round does with one call.
enum Plan {
    Run,
    /// Not run: answered with this content.
    Answer {
        content: String,
        is_error: bool,
    },
    /// The same call appears earlier in this response (at this slot): it shares that result.
    SameAs(usize),
}

struct Slot {
    call: ToolCall,
    canonical: String,
    key: String,
    arg_strings: Vec<String>,
    semantics: RepeatSemantics,
    plan: Plan,
    /// The skills of the cycle this call closes (period 2..=4), if it closes one.
    cycle: Option<Vec<String>>,
    /// The content and error flag the call ended up with.
    result: Option<(String, bool)>,
}

/// Why running stopped before every call had a result.
enum Interrupted {
    Cancelled,
    Deadline,
}

/// A loop signal about one call.
struct Signal {
    guard: GuardKind,
    skill: String,
    key: String,
    what: String,
    evidence: Vec<Evidence>,
    /// Skills to withdraw together at the Withdraw rung (a cycle's members).
    members: Vec<String>,
    /// No doubt is left (the model repeated a call it was already told about, or got the
    /// same result a third time): straight to Finalize.
    certain: bool,
    /// The call was executed (its result stands) rather than answered without running.
    ran: bool,
}

/// State of one round that the per-call checks share.
#[derive(Default)]
struct Round {
    number: u32,
    /// The ladder rung this round reached; set at most once per round.
    rung: Option<Rung>,
    cause: Option<FinalizeCause>,
    fatal: Option<String>,
    /// buddy's notes for the model, sent after the results in a message of their own.
    notes: Vec<String>,
    /// Calls whose result was new (not a repeat of an earlier call's).
    fresh_calls: u32,
    /// Calls that only repeated an earlier call, with the earlier and this call as evidence.
    stale: Vec<Evidence>,
    /// Calls that brought nothing new, and how many of those failed.
    stale_calls: u32,
    failed_calls: u32,
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

/// Unchanged results in a row an undeclared (observed) skill may return for the same
/// arguments before the repeat is a certain loop: enough for a job polled as "running"
/// three times before it is done.
const OBSERVED_PATIENCE: u32 = 3;

const FINAL_ANSWER_ASKED: &str =
    "not run: buddy detected a loop and is asking for the final answer";

impl Turn<'_> {
    /// Runs the calls of one model response and decides where the turn goes next.
    pub(crate) async fn tool_round(&mut self, calls: Vec<ToolCall>, text: &str) -> Step {
        self.guards.rounds += 1;
        let mut round = Round {
            number: self.guards.rounds,
            ..Round::default()
        };
        let loop_on = self.policy.loop_detection;
        let text_repeated = loop_on && self.answer_repeats(text);
        for call in &calls {
            self.emit_call_start(call).await;
        }
        round.notes.append(&mut self.pending_notes);
        if let Some(dropped) = self.guards.dropped_calls.take() {
            round.notes.push(format!(
                "[buddy] Your last reply asked for {dropped} more tool calls than the {} one reply may \
                 have; those were not run. Ask for fewer at a time.",
                self.policy.max_calls_per_reply
            ));
        }
        let mut slots = self.plan_calls(calls, &mut round).await;
        if text_repeated {
            self.repeated_answer(&mut slots, &mut round).await;
        }

        let interrupted = self.run_slots(&mut slots, &mut round).await;

        if round.rung.is_none() {
            self.guards.ladder.clean_round();
        }
        let normalized = normalize(text);
        if normalized.chars().count() >= self.policy.repeated_answer_min_chars {
            self.guards.answers.push(normalized);
        }
        if loop_on && interrupted.is_none() {
            self.judge_progress(&mut round);
        }
        if interrupted.is_none() && round.fatal.is_none() {
            self.budget_note(&mut round);
            if !round.notes.is_empty() {
                let note = round.notes.join("\n");
                self.push(Message::note(note)).await;
            }
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
        let specs = self.toolbox().specs();
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
            return Step::Finalize(FinalizeCause::new(
                reason,
                guard,
                "every tool has been withdrawn".to_owned(),
            ));
        }
        Step::Continue
    }

    /// Books the rounds a resumed turn carries: when a turn paused for tools the client
    /// runs, the client sends the history back with their results and no new user
    /// message. Those rounds belong to this turn: they count against its budget (model
    /// and tool calls), and their results go through the same checks as the results of
    /// server-side calls — so a client-tool loop is caught across round trips. Client
    /// tools are judged as `observed`: by their results. Returns the cause that ends the
    /// turn when the replayed rounds already show a loop.
    pub(crate) async fn replay_resumed_rounds(&mut self) -> Option<FinalizeCause> {
        let start = self.history.iter().rposition(Message::is_user)? + 1;
        let tail: Vec<Message> = self.history[start..].to_vec();
        self.rounds_from = start.min(self.rounds_from);
        let mut ended = None;
        for (i, message) in tail.iter().enumerate() {
            let Message::Assistant { tool_calls, .. } = message else {
                continue;
            };
            if tool_calls.is_empty() {
                continue;
            }
            self.stats.model_calls += 1;
            self.guards.rounds += 1;
            let mut round = Round {
                number: self.guards.rounds,
                ..Round::default()
            };
            for call in tool_calls {
                let Some(outcome) = tail[i + 1..].iter().find_map(|m| match m {
                    Message::Tool {
                        tool_call_id,
                        content,
                        is_error,
                    } if *tool_call_id == call.id => Some(ToolOutcome {
                        content: content.clone(),
                        is_error: *is_error,
                        fatal: false,
                    }),
                    _ => None,
                }) else {
                    continue;
                };
                let canonical = canonical_args(&call.arguments);
                let key = call_key(&call.name, &canonical);
                let cycle = self
                    .guards
                    .log
                    .cycle_period(&key)
                    .map(|_| self.guards.log.cycle_members(&key));
                let slot = Slot {
                    arg_strings: arg_strings(&call.arguments),
                    call: call.clone(),
                    canonical,
                    key: key.clone(),
                    semantics: RepeatSemantics::Observed,
                    plan: Plan::Run,
                    cycle,
                    result: None,
                };
                self.guards.log.note_requested(&key);
                self.after_run(&slot, outcome, &mut round).await;
            }
            if round.rung.is_none() {
                self.guards.ladder.clean_round();
            }
            if self.policy.loop_detection {
                self.judge_progress(&mut round);
            }
            if let Some(cause) = round.cause {
                ended.get_or_insert(cause);
            }
        }
        ended
    }

    /// Counts rounds in a row whose every call failed or only repeated an earlier call with
    /// the same result; enough of them end the turn, whichever skills they used.
    fn judge_progress(&mut self, round: &mut Round) {
        if round.stale.is_empty() || round.fresh_calls > 0 {
            self.guards.stale_rounds = 0;
            return;
        }
        self.guards.stale_rounds += 1;
        let Some(max) = self.policy.max_stale_rounds else {
            return;
        };
        if self.guards.stale_rounds < max || round.cause.is_some() {
            return;
        }
        // Rounds of nothing but failures: the tools cannot do it, rather than a loop.
        let reason = if round.failed_calls == round.stale_calls {
            StopReason::ToolsExhausted
        } else {
            StopReason::LoopDetected
        };
        let cause = FinalizeCause::new(
            reason,
            GuardKind::NoProgress,
            format!(
                "{max} rounds in a row brought nothing new: every call failed, or repeated an earlier one and got the same result"
            ),
        )
        .with_evidence(std::mem::take(&mut round.stale));
        round.set_cause(cause);
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

    /// Applies the checks that need no execution: limits, withdrawn skills, duplicates
    /// within the response, and repeats of skills whose repeats are not re-run.
    async fn plan_calls(&mut self, calls: Vec<ToolCall>, round: &mut Round) -> Vec<Slot> {
        let loop_on = self.policy.loop_detection;
        let mut slots: Vec<Slot> = Vec::with_capacity(calls.len());
        let mut planned_runs = 0u32;
        for call in calls {
            let canonical = canonical_args(&call.arguments);
            let key = call_key(&call.name, &canonical);
            let semantics = self.toolbox().semantics(&call.name).unwrap_or_default();
            let name = call.name.clone();
            let cycle = self
                .guards
                .log
                .cycle_period(&key)
                .map(|_| self.guards.log.cycle_members(&key));
            let mut slot = Slot {
                arg_strings: arg_strings(&call.arguments),
                call,
                canonical,
                key,
                semantics,
                plan: Plan::Run,
                cycle,
                result: None,
            };
            let runs_of_skill = self.guards.calls_per_skill.get(&name).copied().unwrap_or(0)
                + u32::try_from(
                    slots
                        .iter()
                        .filter(|s| s.call.name == name && matches!(s.plan, Plan::Run))
                        .count(),
                )
                .unwrap_or(u32::MAX);
            let earlier_in_response = slots
                .iter()
                .position(|s| s.key == slot.key && matches!(s.plan, Plan::Run));
            let decision = self.decisions.remove(&slot.call.id);
            if let Some(crate::approval::Decision::Reject { reason }) = &decision {
                slot.plan = refused(rejected_result(reason.as_deref()));
            } else if decision.is_none()
                && self.approval.unattended
                && let Some(why) = self.approval.needs_approval(&name, semantics)
            {
                slot.plan = refused(unattended_result(&name));
                self.emit_guard(
                    GuardKind::Approval,
                    GuardAction::Refused,
                    Some(&name),
                    format!(
                        "{why}; nobody can approve calls in this run, so it was not run. Allow it in \
                         buddy.toml ([approval] skills.\"{name}\" = \"never\") or with --approval never"
                    ),
                )
                .await;
            } else if self.policy.finish_tool && name == FINISH_TOOL {
                slot.plan = refused(
                    "`finish` needs arguments {\"answer\": \"<your final answer>\"} with a non-empty answer".to_owned(),
                );
            } else if self.stats.tool_calls + planned_runs >= self.policy.max_tool_calls {
                let max = self.policy.max_tool_calls;
                slot.plan = refused(format!(
                    "not run: this turn's limit of {max} tool calls is reached"
                ));
                round.set_cause(FinalizeCause::new(
                    StopReason::MaxToolCalls,
                    GuardKind::ToolCallLimit,
                    format!("{max} of {max} tool calls used"),
                ));
            } else if let Some((why, by)) = self.guards.withdrawn.get(&name).cloned() {
                slot.plan = refused(format!(
                    "not run: `{name}` is no longer available in this turn ({why}); answer with what you have"
                ));
                self.withdrawn_called(&slot, &why, by, round).await;
            } else if !self.tools_offered_now {
                slot.plan = refused(
                    "not run: no tools are offered now; answer with what you have".to_owned(),
                );
                self.withdrawn_called(
                    &slot,
                    "no tools are offered",
                    GuardKind::ToolsWithdrawn,
                    round,
                )
                .await;
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
                self.count_trip(&name, GuardKind::SkillCallLimit, &why, round);
                slot.plan = refused(format!(
                    "not run: `{name}` is withdrawn: {why}; answer with what you have"
                ));
            } else if let Some(first) = earlier_in_response {
                // A parallel batch that names the same call twice: run it once.
                slot.plan = Plan::SameAs(first);
            } else if loop_on
                && matches!(
                    slot.semantics,
                    RepeatSemantics::Pure | RepeatSemantics::Effectful
                )
                && let Some(earlier) = self.guards.log.last_with_key(&slot.key).cloned()
            {
                self.repeat_not_rerun(&mut slot, &earlier, round).await;
            }
            if matches!(slot.plan, Plan::Run) {
                planned_runs += 1;
            }
            self.guards.log.note_requested(&slot.key);
            slots.push(slot);
        }
        slots
    }

    /// A call to a skill that is no longer offered goes straight to Finalize: another
    /// round would only cost a model call.
    async fn withdrawn_called(&mut self, slot: &Slot, why: &str, by: GuardKind, round: &mut Round) {
        let name = &slot.call.name;
        let what = format!("`{name}` was called although it is not offered ({why})");
        if !self.policy.loop_detection {
            self.emit_guard(
                GuardKind::WithdrawnSkillCalled,
                GuardAction::Refused,
                Some(name),
                what,
            )
            .await;
            return;
        }
        let reason = if is_loop_guard(by) {
            StopReason::LoopDetected
        } else {
            StopReason::ToolsExhausted
        };
        let cause =
            FinalizeCause::new(reason, GuardKind::WithdrawnSkillCalled, what).with_evidence(vec![
                Evidence::new(&slot.call.id, name, &slot.call.arguments, "(not run)"),
            ]);
        round.set_cause(cause);
    }

    /// A repeat of a `pure` or `effectful` skill: answered from the earlier result (not
    /// run again) the first time, withdrawn or finalized after that.
    async fn repeat_not_rerun(&mut self, slot: &mut Slot, earlier: &CallRecord, round: &mut Round) {
        let name = slot.call.name.clone();
        let in_cycle = slot.cycle.is_some();
        let what = if in_cycle {
            format!(
                "`{name}` was called again with the same arguments, in a cycle with other calls"
            )
        } else {
            format!("`{name}` was called again with the same arguments")
        };
        let evidence = vec![
            earlier.evidence(),
            Evidence::new(&slot.call.id, &name, &slot.call.arguments, "(not run)"),
        ];
        let signal = Signal {
            guard: if in_cycle {
                GuardKind::Cycle
            } else {
                GuardKind::Repetition
            },
            skill: name.clone(),
            key: slot.key.clone(),
            what,
            evidence: evidence.clone(),
            members: slot.cycle.clone().unwrap_or_default(),
            certain: self.guards.signalled.contains(&slot.key),
            ran: false,
        };
        let rung = self.trip(signal, round).await;
        slot.plan = match rung {
            Rung::Note => {
                round.notes.push(format!(
                    "[buddy] `{name}` was called again with the same arguments; it was not run again and its \
                     earlier result was returned. Use it, or answer the user."
                ));
                round.stale_calls += 1;
                round.stale.extend(evidence);
                Plan::Answer {
                    content: earlier.result.clone(),
                    is_error: earlier.is_error,
                }
            }
            Rung::Withdraw => refused(format!(
                "not run: `{name}` was called again with the same arguments, so it is withdrawn for the rest \
                 of this turn; its earlier result is above"
            )),
            Rung::Finalize => refused(FINAL_ANSWER_ASKED.to_owned()),
        };
    }

    /// The same answer text came again beside new calls.
    async fn repeated_answer(&mut self, slots: &mut [Slot], round: &mut Round) {
        let what = "the same answer text came again beside new tool calls".to_owned();
        let skills: Vec<String> = slots
            .iter()
            .filter(|s| matches!(s.plan, Plan::Run))
            .map(|s| s.call.name.clone())
            .collect();
        let signal = Signal {
            guard: GuardKind::RepeatedAnswer,
            skill: skills.first().cloned().unwrap_or_default(),
            key: String::new(),
            what: what.clone(),
            evidence: Vec::new(),
            members: skills,
            certain: false,
            ran: false,
        };
        match self.trip(signal, round).await {
            Rung::Note => round.notes.push(
                "[buddy] Your answer text is the same as in an earlier round. If your answer is complete, give \
                 it without calling tools."
                    .to_owned(),
            ),
            Rung::Withdraw => {
                for slot in slots.iter_mut().filter(|s| matches!(s.plan, Plan::Run)) {
                    slot.plan = refused(format!(
                        "not run: {what}, so `{}` is withdrawn for the rest of this turn. If your answer is \
                         complete, give it without calling tools.",
                        slot.call.name
                    ));
                }
            }
            Rung::Finalize => {
                for slot in slots.iter_mut().filter(|s| matches!(s.plan, Plan::Run)) {
                    slot.plan = refused(FINAL_ANSWER_ASKED.to_owned());
                }
            }
        }
    }

    /// Feeds one signal to the ladder (one step per round) and carries out the rung's
    /// withdrawal or Finalize; returns the rung so the caller can shape the call's result.
    async fn trip(&mut self, signal: Signal, round: &mut Round) -> Rung {
        let Signal {
            guard,
            skill,
            key,
            what,
            evidence,
            members,
            certain,
            ran,
        } = signal;
        if !key.is_empty() {
            self.guards.signalled.insert(key);
        }
        self.guards.tripped_skills.insert(skill.clone());
        let rung = if certain {
            Rung::Finalize
        } else {
            *round
                .rung
                .get_or_insert_with(|| self.guards.ladder.step(self.policy.max_guard_trips))
        };
        match rung {
            Rung::Note => {
                let action = if ran || guard == GuardKind::RepeatedAnswer {
                    GuardAction::Warned
                } else {
                    GuardAction::ReturnedEarlierResult
                };
                if ran {
                    round.notes.push(format!(
                        "[buddy] {what}. Calling it this way again will not bring anything new; use what you \
                         have, try something else, or answer the user."
                    ));
                }
                self.emit_guard_with(guard, action, Some(&skill), what, evidence)
                    .await;
            }
            Rung::Withdraw => {
                let mut names = members;
                if !names.contains(&skill) && !skill.is_empty() {
                    names.push(skill);
                }
                let why = match guard {
                    GuardKind::Cycle => "it kept being called in a cycle with other calls",
                    GuardKind::RepeatedAnswer => "the same answer kept coming with new calls to it",
                    GuardKind::NearDuplicate => {
                        "its arguments kept changing while its result stayed the same"
                    }
                    _ => "it kept being called with the same arguments and result",
                };
                for name in &names {
                    self.withdraw(name, why.to_owned(), guard);
                    self.emit_guard_with(
                        guard,
                        GuardAction::WithdrewSkill,
                        Some(name),
                        what.clone(),
                        evidence.clone(),
                    )
                    .await;
                }
                round.notes.push(format!(
                    "[buddy] {} withdrawn for the rest of this turn: {what}. Answer with what you have, or \
                     use another tool.",
                    names
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                        + if names.len() == 1 { " is" } else { " are" }
                ));
            }
            Rung::Finalize => {
                let (guard, detail) = self.finalize_guard(guard, what, certain);
                round.set_cause(
                    FinalizeCause::new(StopReason::LoopDetected, guard, detail)
                        .with_evidence(evidence),
                );
            }
        }
        rung
    }

    /// The guard to name when the ladder reaches Finalize: the trip budget when trips on
    /// several skills added up, else the guard itself.
    fn finalize_guard(&self, guard: GuardKind, what: String, certain: bool) -> (GuardKind, String) {
        if !certain && self.guards.tripped_skills.len() > 1 {
            let skills: Vec<&str> = self
                .guards
                .tripped_skills
                .iter()
                .map(String::as_str)
                .collect();
            (
                GuardKind::TripBudget,
                format!(
                    "{what}; {} guard trips in this turn on {} (policy max_guard_trips = {})",
                    self.guards.ladder.total(),
                    skills.join(", "),
                    self.policy.max_guard_trips
                ),
            )
        } else {
            (guard, what)
        }
    }

    /// Counts a trip that is not a loop signal (circuit breaker, per-skill limit): it
    /// adds to the turn's budget of trips and may finalize the turn.
    fn count_trip(&mut self, skill: &str, guard: GuardKind, what: &str, round: &mut Round) {
        self.guards.tripped_skills.insert(skill.to_owned());
        let rung = *round
            .rung
            .get_or_insert_with(|| self.guards.ladder.step(self.policy.max_guard_trips));
        if rung == Rung::Finalize {
            let (guard, detail) = self.finalize_guard(guard, what.to_owned(), false);
            let reason = if is_loop_guard(guard) {
                StopReason::LoopDetected
            } else {
                StopReason::ToolsExhausted
            };
            round.set_cause(FinalizeCause::new(reason, guard, detail));
        }
    }

    /// Runs the `Run` slots concurrently (bounded), emitting and recording every result
    /// in call order. Calls still running when the turn is cancelled or its deadline
    /// passes get an error result, so the history stays valid.
    async fn run_slots(&mut self, slots: &mut [Slot], round: &mut Round) -> Option<Interrupted> {
        let toolbox = self.toolbox_handle();
        let cancel = self.cancel.clone();
        let deadline = self.deadline;
        let parallel = usize::try_from(self.policy.max_parallel_tools)
            .unwrap_or(1)
            .max(1);
        // Collected first so the stream holds no closures across awaits (keeps the future Send).
        let to_run: Vec<ToolCall> = slots
            .iter()
            .filter(|s| matches!(s.plan, Plan::Run))
            .map(|s| s.call.clone())
            .collect();
        let mut pending: Vec<buddy_core::BoxFuture<'_, ToolOutcome>> = Vec::new();
        for call in &to_run {
            let ctx = SkillContext {
                call_id: call.id.clone(),
            };
            pending.push(toolbox.invoke(call, ctx));
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
        for i in 0..slots.len() {
            let (content, is_error) = match (&slots[i].plan, &interrupted) {
                (Plan::Answer { content, is_error }, _) => (content.clone(), *is_error),
                (Plan::SameAs(first), _) => slots[*first].result.clone().unwrap_or_else(|| {
                    (
                        "not finished: the same call above did not finish".to_owned(),
                        true,
                    )
                }),
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
                        Ok(Some(outcome)) => self.after_run(&slots[i], outcome, round).await,
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
            let slot = &mut slots[i];
            slot.result = Some((content.clone(), is_error));
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

    /// Books one executed call: counters, circuit breaker, and the checks that judge a
    /// call by its result. Returns the result exactly as the skill gave it.
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
        if outcome.fatal {
            round.fatal = Some(format!(
                "skill `{name}` failed fatally: {}",
                outcome.content
            ));
        }
        if outcome.is_error {
            self.circuit_breaker(name, round).await;
        } else {
            self.guards.consecutive_failures.insert(name.to_owned(), 0);
        }

        let earlier = self.guards.log.last_with_key(&slot.key).cloned();
        let unchanged = earlier.as_ref().map_or(0, |prev| {
            if prev.is_error == outcome.is_error
                && same_result(
                    &prev.result,
                    &prev.arg_strings,
                    &outcome.content,
                    &slot.arg_strings,
                )
            {
                prev.unchanged + 1
            } else {
                0
            }
        });
        if self.policy.loop_detection
            && let Some(signal) = self.judge_result(slot, &outcome, earlier.as_ref(), unchanged)
        {
            self.trip(signal, round).await;
        }
        let record = CallRecord {
            call_id: slot.call.id.clone(),
            name: name.to_owned(),
            key: slot.key.clone(),
            arguments: slot.call.arguments.clone(),
            canonical_args: slot.canonical.clone(),
            arg_strings: slot.arg_strings.clone(),
            result: outcome.content.clone(),
            is_error: outcome.is_error,
            round: round.number,
            unchanged,
        };
        // A pollable skill waiting within its patience is not "nothing new".
        let waiting =
            slot.semantics == RepeatSemantics::Pollable && unchanged <= self.policy.poll_patience;
        let repeated = self.guards.log.repeated_by(&record).filter(|_| !waiting);
        if repeated.is_some() || record.is_error {
            round.stale_calls += 1;
            round.failed_calls += u32::from(record.is_error);
        }
        match repeated {
            Some(prev) => round.stale.extend([prev.evidence(), record.evidence()]),
            // A failure is not progress either, whatever its message says.
            _ if record.is_error => round.stale.push(record.evidence()),
            _ => round.fresh_calls += 1,
        }
        self.guards.log.push(record);
        (outcome.content, outcome.is_error)
    }

    /// The loop signal an executed call's result gives, if any: the same call with the
    /// same result again, a cycle whose calls bring nothing new, or arguments that keep
    /// changing while the result (less what it echoes of them) stays the same.
    fn judge_result(
        &mut self,
        slot: &Slot,
        outcome: &ToolOutcome,
        earlier: Option<&CallRecord>,
        unchanged: u32,
    ) -> Option<Signal> {
        let name = slot.call.name.as_str();
        let evidence_with = |prev: &CallRecord| {
            vec![
                prev.evidence(),
                Evidence::new(&slot.call.id, name, &slot.call.arguments, &outcome.content),
            ]
        };
        let signalled = self.guards.signalled.contains(&slot.key);
        if let Some(prev) = earlier
            && unchanged > 0
        {
            let times = unchanged + 1;
            let base = Signal {
                guard: GuardKind::Repetition,
                skill: name.to_owned(),
                key: slot.key.clone(),
                what: format!(
                    "`{name}` was called with the same arguments and returned the same result {times} times"
                ),
                evidence: evidence_with(prev),
                members: Vec::new(),
                certain: false,
                ran: true,
            };
            match slot.semantics {
                RepeatSemantics::Pollable => {
                    if unchanged > self.policy.poll_patience {
                        return Some(Signal {
                            certain: signalled,
                            ..base
                        });
                    }
                    return None;
                }
                _ => {
                    // A second and third look are normal (a job still running); a fourth
                    // identical result, or a repeat after a warning about this very call,
                    // is a loop beyond doubt.
                    if unchanged >= OBSERVED_PATIENCE || signalled {
                        return Some(Signal {
                            certain: true,
                            ..base
                        });
                    }
                    if let Some(members) = &slot.cycle {
                        return Some(Signal {
                            guard: GuardKind::Cycle,
                            what: format!(
                                "`{name}` was called again with the same arguments and result, in a cycle with {}",
                                members.join(", ")
                            ),
                            members: members.clone(),
                            ..base
                        });
                    }
                    return None;
                }
            }
        }
        if outcome.is_error || earlier.is_some() {
            return None;
        }
        // Near-duplicates: compared with this skill's latest call from an earlier round,
        // never with calls of the same response (a parallel batch is not a repeat).
        let prev = self
            .guards
            .log
            .last_of_before_round(name, self.guards.rounds)?;
        let echo = !prev.is_error
            && args_near(&prev.canonical_args, &slot.canonical)
            && same_result(
                &prev.result,
                &prev.arg_strings,
                &outcome.content,
                &slot.arg_strings,
            );
        let streak = self.guards.echo_streak.entry(name.to_owned()).or_default();
        if !echo {
            *streak = 0;
            return None;
        }
        *streak += 1;
        let evidence = evidence_with(prev);
        (*streak >= 2).then(|| Signal {
            guard: GuardKind::NearDuplicate,
            skill: name.to_owned(),
            key: String::new(),
            what: format!(
                "`{name}` was called with changed arguments {} times in a row and its result, less what it \
                 echoes of them, stayed the same",
                *streak + 1
            ),
            evidence,
            members: Vec::new(),
            certain: false,
            ran: true,
        })
    }

    /// Withdraws a skill that failed too many times in a row.
    async fn circuit_breaker(&mut self, name: &str, round: &mut Round) {
        let failures = self
            .guards
            .consecutive_failures
            .entry(name.to_owned())
            .or_default();
        *failures += 1;
        let failures = *failures;
        if failures < self.policy.max_consecutive_failures
            || self.guards.withdrawn.contains_key(name)
        {
            return;
        }
        let why = format!("it failed {failures} times in a row");
        self.withdraw(name, why.clone(), GuardKind::CircuitBreaker);
        self.emit_guard(
            GuardKind::CircuitBreaker,
            GuardAction::WithdrewSkill,
            Some(name),
            why.clone(),
        )
        .await;
        round.notes.push(format!(
            "[buddy] `{name}` failed {failures} times in a row and is withdrawn for the rest of this turn; \
             answer with what you have."
        ));
        self.count_trip(name, GuardKind::CircuitBreaker, &why, round);
    }

    /// "N of M model calls left", once half the budget is spent.
    fn budget_note(&self, round: &mut Round) {
        let max = self.policy.max_model_calls;
        if self.policy.show_budget && self.stats.model_calls * 2 >= max {
            let left = max.saturating_sub(self.stats.model_calls);
            round.notes.push(format!(
                "[buddy] {left} of {max} model calls left in this turn; the last is reserved for your answer."
            ));
        }
    }

    /// Stops offering `name` for the rest of the turn, remembering which guard did it.
    fn withdraw(&mut self, name: &str, why: String, by: GuardKind) {
        self.guards.withdrawn.insert(name.to_owned(), (why, by));
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
            | GuardKind::TripBudget
            | GuardKind::NoProgress
    )
}
