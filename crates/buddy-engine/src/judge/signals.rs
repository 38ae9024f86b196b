//! Loop signals and the escalation ladder: what a call's result says (the same call and
//! result again, a cycle, arguments that change while the result does not, a skill that
//! keeps failing, rounds that bring nothing new), and what each trip earns: a note, a
//! withdrawal, or Finalize.

use buddy_core::{Evidence, GuardAction, GuardKind, RepeatSemantics, StopReason, ToolOutcome};

use super::memory::Judge;
use super::results::{Facts, OBSERVED_PATIENCE, judge_result};
use super::round::{Plan, RoundJudge, Slot, refused};
use super::signal::{Signal, bump};
use super::verdict::{FinalizeCause, Trip, stop_for};
use crate::guards::call_log::CallRecord;
use crate::guards::digest::digest;
use crate::guards::ladder::Rung;
use crate::guards::shape::near_repeat;
use crate::guards::similarity::args_counted_or_grown;
use crate::guards::tokens::tokens;
use crate::words::{self, not_run};

impl RoundJudge {
    /// Books one executed call: counters, circuit breaker, and the checks that judge a
    /// call by its result. Returns the trips to announce before the call's result.
    pub(super) fn observe(
        &mut self,
        judge: &mut Judge,
        slot: &Slot,
        outcome: &ToolOutcome,
    ) -> Vec<Trip> {
        let mut trips = Vec::new();
        let name = slot.call.name.as_str();
        bump(&mut judge.memory.calls_per_skill, name, |n| *n += 1);
        if outcome.fatal {
            self.fatal = Some(format!(
                "skill `{name}` failed fatally: {}",
                outcome.content
            ));
        }
        // The result read once: its fingerprint and its tokens.
        let digest = digest(&outcome.content, &slot.arg_strings);
        let fingerprint = digest.fingerprint;
        if outcome.is_error {
            // Only the same action failing the same way counts: distinct actions whose
            // failures read alike (three greps that find nothing) are answers.
            let same_failure = judge.memory.log.last_of(name).is_some_and(|prev| {
                prev.is_error
                    && prev.fingerprint == fingerprint
                    && (prev.key == slot.key
                        || args_counted_or_grown(&prev.canonical_args, &slot.canonical))
            });
            self.circuit_breaker(judge, name, !same_failure, &mut trips);
        } else {
            bump(&mut judge.memory.consecutive_failures, name, |n| *n = 0);
        }
        let earlier = judge.memory.log.last_with_key(&slot.key).cloned();
        // New actions since this one last ran: the model did something else in between,
        // so running it again is checking anew (a test after a fix), not going round.
        let moved_on = earlier
            .as_ref()
            .is_some_and(|prev| judge.memory.log.actions() > prev.actions_at);
        // Nothing new for this call: the same information it got before (after noise and
        // echo), so values that flip between a few states count as unchanged too.
        let seen_here = judge
            .memory
            .log
            .seen_for_key(&slot.key, outcome.is_error, fingerprint)
            .is_some();
        // A near-repeat: the same action again with nothing done in between, whose result
        // differs from the last only in its numbers (a file shown again, grown).
        let near = !seen_here
            && !moved_on
            && earlier.as_ref().is_some_and(|prev| {
                prev.is_error == outcome.is_error && near_repeat(&prev.result, &outcome.content)
            });
        let unchanged = match (&earlier, seen_here || near) {
            (Some(prev), true) if !moved_on => prev.unchanged + 1,
            _ => 0,
        };
        let follows = self.follows_latest_results(judge, slot, digest.tokens);
        if judge.policy.loop_detection
            && let Some(signal) = judge_result(
                judge,
                slot,
                outcome,
                Facts {
                    earlier: earlier.as_ref(),
                    unchanged,
                    fingerprint,
                    follows,
                    near,
                },
            )
        {
            self.trip(judge, signal, &mut trips);
        }
        let record = CallRecord {
            call_id: slot.call.id.clone(),
            name: name.to_owned(),
            key: slot.key.clone(),
            arguments: Evidence::arguments_excerpt(&slot.call.arguments),
            canonical_args: slot.canonical.clone(),
            arg_strings: slot.arg_strings.clone(),
            result: outcome.content.clone(),
            fingerprint,
            is_error: outcome.is_error,
            round: self.number,
            unchanged,
            actions_at: 0,
        };
        // A new action is progress, whatever it returned (an empty output, `ok`, the same
        // listing): only the same action again, returning what it returned before past
        // the patience a job still running is given, brings nothing.
        let patience = match slot.semantics {
            RepeatSemantics::Pollable => judge.policy.poll_patience,
            _ => OBSERVED_PATIENCE,
        };
        if let Some(prev) = earlier.as_ref().filter(|_| unchanged > patience) {
            self.stale_calls += 1;
            self.failed_calls += u32::from(record.is_error);
            self.stale.extend([prev.evidence(), record.evidence()]);
        } else {
            self.fresh_calls += 1;
        }
        // New information (a result the skill had not given, or arguments that carry what
        // the latest results said) ends every streak of arguments that changed in vain.
        let new_result = judge
            .memory
            .log
            .seen_for_skill(name, outcome.is_error, fingerprint)
            .is_none();
        self.informative_calls += u32::from(new_result || follows);
        self.progress_calls += u32::from(earlier.is_none() && new_result);
        judge.memory.log.push(record);
        trips
    }

    /// Books a call answered without running (refused, withdrawn, or a repeat given its
    /// earlier result): it brought nothing new, so a round of nothing else counts toward
    /// `no_progress`.
    pub(super) fn not_run(&mut self, slot: &Slot, content: &str, is_error: bool) {
        self.stale_calls += 1;
        self.failed_calls += u32::from(is_error);
        self.stale.push(Evidence::new(
            &slot.call.id,
            &slot.call.name,
            &slot.call.arguments,
            content,
        ));
    }

    /// True when the call's arguments carry a token that first appeared in the latest
    /// round's results (the model follows what it read); then books the tokens of its
    /// arguments and its result's `result_tokens` as seen.
    fn follows_latest_results(
        &mut self,
        judge: &mut Judge,
        slot: &Slot,
        result_tokens: Vec<u64>,
    ) -> bool {
        let memory = &mut judge.memory;
        let carried = tokens(&slot.call.arguments);
        let follows = carried.iter().any(|t| memory.latest_tokens.contains(t));
        memory.seen_tokens.extend(carried);
        for token in result_tokens {
            if memory.seen_tokens.insert(token) {
                self.new_tokens.insert(token);
            }
        }
        follows
    }

    /// A repeat of a `pure` or `effectful` skill: answered from the earlier result (not
    /// run again) the first time, withdrawn or finalized after that.
    pub(super) fn repeat_not_rerun(
        &mut self,
        judge: &mut Judge,
        slot: &mut Slot,
        earlier: &CallRecord,
        trips: &mut Vec<Trip>,
    ) {
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
            certain: judge.memory.signalled.contains(&slot.key),
            ran: false,
            left: None,
        };
        slot.plan = match self.trip(judge, signal, trips) {
            Rung::Note => {
                self.notes.push(words::earlier_result_note(&name));
                self.stale_calls += 1;
                self.stale.extend(evidence);
                Plan::Answer {
                    content: earlier.result.clone(),
                    is_error: earlier.is_error,
                }
            }
            Rung::Withdraw => refused(not_run::repeat_withdrawn(&name)),
            Rung::Finalize => refused(not_run::LOOP_FINAL.to_owned()),
        };
    }

    /// The same answer text came again beside new calls.
    pub(super) fn repeated_answer(
        &mut self,
        judge: &mut Judge,
        slots: &mut [Slot],
        trips: &mut Vec<Trip>,
    ) {
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
            left: None,
        };
        let runs = slots.iter_mut().filter(|s| matches!(s.plan, Plan::Run));
        match self.trip(judge, signal, trips) {
            Rung::Note => self.notes.push(words::REPEATED_ANSWER_NOTE.to_owned()),
            Rung::Withdraw => {
                for slot in runs {
                    slot.plan = refused(not_run::repeated_answer(&what, &slot.call.name));
                }
            }
            Rung::Finalize => {
                for slot in runs {
                    slot.plan = refused(not_run::LOOP_FINAL.to_owned());
                }
            }
        }
    }

    /// Feeds one signal to the ladder (one step per round) and carries out the rung's
    /// note, withdrawal or Finalize; returns the rung so the caller can shape the result.
    fn trip(&mut self, judge: &mut Judge, signal: Signal, trips: &mut Vec<Trip>) -> Rung {
        let Signal {
            guard,
            skill,
            key,
            what,
            evidence,
            members,
            certain,
            ran,
            left,
        } = signal;
        if !key.is_empty() {
            judge.memory.signalled.insert(key);
        }
        judge.memory.tripped_skills.insert(skill.clone());
        let rung = if certain {
            Rung::Finalize
        } else {
            let rung = *self
                .rung
                .get_or_insert_with(|| judge.memory.ladder.step(judge.policy.max_guard_trips));
            // A call that ran is warned, not withdrawn: the end comes only if the model
            // keeps at it (or the turn's trips add up with no progress between).
            match rung {
                Rung::Withdraw if ran => Rung::Note,
                rung => rung,
            }
        };
        match rung {
            Rung::Note => {
                let action = if ran || guard == GuardKind::RepeatedAnswer {
                    GuardAction::Warned
                } else {
                    GuardAction::ReturnedEarlierResult
                };
                if ran {
                    self.notes.push(words::loop_warning_note(&what, left));
                }
                trips.push(
                    Trip::new(guard, action, what)
                        .on(&skill)
                        .with_evidence(evidence),
                );
            }
            Rung::Withdraw => {
                let mut names = members;
                if !names.contains(&skill) && !skill.is_empty() {
                    names.push(skill.clone());
                }
                let why = match guard {
                    GuardKind::Cycle => "it kept being called in a cycle with other calls",
                    GuardKind::RepeatedAnswer => "the same answer kept coming with new calls to it",
                    GuardKind::NearDuplicate => {
                        "its arguments kept changing while its result stayed the same"
                    }
                    _ => "it kept being called with the same arguments and result",
                };
                self.withdrawal_evidence.clone_from(&evidence);
                for name in &names {
                    judge.memory.withdraw(name, why.to_owned(), guard);
                    // Each withdrawal speaks of its own tool: another member of a cycle
                    // is named as one, beside the call that closed it.
                    let detail = match name == &skill {
                        true => what.clone(),
                        false => format!("`{name}` was part of that loop: {what}"),
                    };
                    trips.push(
                        Trip::new(guard, GuardAction::WithdrewSkill, detail)
                            .on(name)
                            .with_evidence(evidence.clone()),
                    );
                }
                self.notes.push(words::withdrawn_note(&names, &what));
            }
            Rung::Finalize => {
                let (guard, detail) = finalize_guard(judge, guard, what, certain);
                self.set_cause(
                    FinalizeCause::new(StopReason::LoopDetected, guard, detail)
                        .with_evidence(evidence),
                );
            }
        }
        rung
    }

    /// Counts a trip that is not a loop signal (circuit breaker, per-skill limit): it
    /// adds to the turn's budget of trips and may finalize the turn.
    pub(super) fn count_trip(
        &mut self,
        judge: &mut Judge,
        skill: &str,
        guard: GuardKind,
        what: &str,
    ) {
        judge.memory.tripped_skills.insert(skill.to_owned());
        let rung = *self
            .rung
            .get_or_insert_with(|| judge.memory.ladder.step(judge.policy.max_guard_trips));
        if rung == Rung::Finalize {
            let (guard, detail) = finalize_guard(judge, guard, what.to_owned(), false);
            self.set_cause(FinalizeCause::new(stop_for(guard), guard, detail));
        }
    }

    /// Withdraws a skill that failed too many times in a row saying nothing new: a
    /// failure with a message the skill had not given before starts the count again
    /// (a test that fails differently after each fix is progress, not a broken tool).
    fn circuit_breaker(
        &mut self,
        judge: &mut Judge,
        name: &str,
        new_message: bool,
        trips: &mut Vec<Trip>,
    ) {
        let failures = judge
            .memory
            .consecutive_failures
            .entry(name.to_owned())
            .or_default();
        *failures = if new_message { 1 } else { *failures + 1 };
        let failures = *failures;
        if failures < judge.policy.max_consecutive_failures || judge.memory.is_withdrawn(name) {
            return;
        }
        let why = format!("it failed {failures} times in a row");
        judge
            .memory
            .withdraw(name, why.clone(), GuardKind::CircuitBreaker);
        trips.push(
            Trip::new(
                GuardKind::CircuitBreaker,
                GuardAction::WithdrewSkill,
                why.clone(),
            )
            .on(name),
        );
        self.notes.push(words::circuit_breaker_note(name, failures));
        self.count_trip(judge, name, GuardKind::CircuitBreaker, &why);
    }

    /// Counts rounds in a row whose every call was not run or only repeated an earlier call
    /// with the same result; enough of them end the turn, whichever skills they used.
    pub(super) fn judge_progress(&mut self, judge: &mut Judge) {
        if self.stale.is_empty() || self.fresh_calls > 0 {
            judge.memory.stale_rounds = 0;
            return;
        }
        judge.memory.stale_rounds += 1;
        let Some(max) = judge.policy.max_stale_rounds else {
            return;
        };
        if judge.memory.stale_rounds < max || self.cause.is_some() {
            return;
        }
        // Rounds of nothing but failures: the tools cannot do it, rather than a loop.
        let reason = if self.failed_calls == self.stale_calls {
            StopReason::ToolsExhausted
        } else {
            StopReason::LoopDetected
        };
        let cause = FinalizeCause::new(
            reason,
            GuardKind::NoProgress,
            format!(
                "{max} rounds in a row brought nothing new: every call was not run, or repeated an earlier one and got the same result"
            ),
        )
        .with_evidence(std::mem::take(&mut self.stale));
        self.set_cause(cause);
    }
}

/// The guard to name when the ladder reaches Finalize: the trip budget when trips on
/// several skills added up, else the guard itself.
fn finalize_guard(
    judge: &Judge,
    guard: GuardKind,
    what: String,
    certain: bool,
) -> (GuardKind, String) {
    let tripped = &judge.memory.tripped_skills;
    if certain || tripped.len() <= 1 {
        return (guard, what);
    }
    let skills: Vec<&str> = tripped.iter().map(String::as_str).collect();
    (
        GuardKind::TripBudget,
        format!(
            "{what}; {} guard trips with no progress between on {} (policy max_guard_trips = {})",
            judge.memory.ladder.counted(),
            skills.join(", "),
            judge.policy.max_guard_trips
        ),
    )
}
