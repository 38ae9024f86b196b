//! Judging one tool round: which calls run and which are answered without running
//! (limits, withdrawn skills, duplicates in the response, repeats of skills that are not
//! re-run), then — as each result comes in, see `signals.rs` — what the results say, and
//! at the end of the round where the turn goes.

use buddy_core::{
    Evidence, GuardAction, GuardKind, RepeatSemantics, StopReason, ToolCall, ToolOutcome,
};

use super::memory::Judge;
use super::token_set::TokenSet;
use super::verdict::{FinalizeCause, Trip, stop_for};
use crate::approval::ApprovalRules;
use crate::guards::call_log::call_key;
use crate::guards::canonical;
use crate::guards::ladder::Rung;
use crate::guards::similarity::{
    MIN_ECHO_CHARS, NEAR_ANSWER, args_counted_or_grown, normalize, text_similarity,
};
use crate::words;

/// What the round does with one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    Run,
    /// Not run: answered with this content.
    Answer {
        content: String,
        is_error: bool,
    },
    /// The same call appears earlier in this response (at this slot): it shares that result.
    SameAs(usize),
}

/// An error result that says why the call was not run.
pub(crate) fn refused(content: String) -> Plan {
    Plan::Answer {
        content,
        is_error: true,
    }
}

/// One call of the round, as the judge sees it.
#[derive(Clone, Debug)]
pub(crate) struct Slot {
    pub call: ToolCall,
    pub canonical: String,
    pub key: String,
    pub arg_strings: Vec<String>,
    pub semantics: RepeatSemantics,
    pub plan: Plan,
    /// The skills of the cycle this call closes (period 2..=4), if it closes one.
    pub cycle: Option<Vec<String>>,
}

/// The judge's view of one round while it runs.
#[derive(Debug, Default)]
pub(crate) struct RoundJudge {
    pub(super) number: u32,
    /// The ladder rung this round reached; set at most once per round.
    pub(super) rung: Option<Rung>,
    pub(super) cause: Option<FinalizeCause>,
    pub(super) fatal: Option<String>,
    /// buddy's notes for the model, sent after the results in a message of their own.
    pub(super) notes: Vec<String>,
    /// Calls that moved the turn on: new actions, and repeats within their patience.
    pub(super) fresh_calls: u32,
    /// Calls that told the model something new: a result their skill had not given, or
    /// arguments that carry what the latest results said.
    pub(super) informative_calls: u32,
    /// Calls that were real progress: a new action that brought a result its skill had
    /// not given (a round with one makes earlier guard trips stop counting).
    pub(super) progress_calls: u32,
    /// Calls that only repeated an earlier call, with the earlier and this call as evidence.
    pub(super) stale: Vec<Evidence>,
    /// Calls that brought nothing new, and how many of those failed.
    pub(super) stale_calls: u32,
    pub(super) failed_calls: u32,
    /// The reply's text said what an earlier round beside tool calls already said.
    pub(super) text_repeated: bool,
    /// Tokens that first appeared in this round's results.
    pub(super) new_tokens: TokenSet,
    /// The calls behind this round's latest withdrawal, named again if it leaves no tools.
    pub(super) withdrawal_evidence: Vec<Evidence>,
    /// The reply's text beside the calls, normalised once for both ends of the round.
    normalized_text: String,
}

/// What the driver tells the judge about the round.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RoundFacts<'a> {
    /// Tool calls the turn made before this round.
    pub tool_calls_so_far: u32,
    /// Whether the model call that asked for these calls offered tools.
    pub tools_offered: bool,
    pub approval: &'a ApprovalRules,
    /// Tool calls this round may run under the turn's tree (drawn from the pool the turn
    /// shares with its sub-agents and parents before planning); `u32::MAX` outside a tree.
    pub tree_tool_calls: u32,
}

/// Where the round sends the turn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RoundVerdict {
    /// buddy's notes to send after the results (none once the turn is ending badly).
    pub notes: Vec<String>,
    /// A skill failed fatally: the turn ends `skill_failed` with this message.
    pub fatal: Option<String>,
    /// The turn goes to Finalize.
    pub cause: Option<FinalizeCause>,
}

impl RoundJudge {
    /// Opens a round for a reply with `text` beside its calls; `pending` are notes that
    /// wait for this round (a person's edit of a call).
    pub(super) fn begin(judge: &mut Judge, text: &str, pending: Vec<String>) -> RoundJudge {
        judge.memory.rounds += 1;
        let normalized_text = normalize(text);
        let mut round = RoundJudge {
            number: judge.memory.rounds,
            text_repeated: judge.policy.loop_detection && answer_repeats(judge, &normalized_text),
            normalized_text,
            notes: pending,
            ..RoundJudge::default()
        };
        if let Some(dropped) = judge.memory.dropped_calls.take() {
            round.notes.push(words::dropped_calls_note(
                dropped,
                judge.policy.max_calls_per_reply,
            ));
        }
        round
    }

    /// Opens a round that already happened (the results came with the request: a client
    /// ran its tools), to be booked call by call with [`RoundJudge::observe`].
    pub(super) fn booked(judge: &mut Judge) -> RoundJudge {
        judge.memory.rounds += 1;
        RoundJudge {
            number: judge.memory.rounds,
            ..RoundJudge::default()
        }
    }

    /// A slot for `call`, before any check.
    pub(super) fn slot(judge: &Judge, call: ToolCall, semantics: RepeatSemantics) -> Slot {
        // Parsed once for both; what is kept of it is bounded whatever its size.
        let parsed = canonical::parse(&call.arguments);
        let canonical = canonical::canonical_of(&call.arguments, parsed.as_ref());
        let arg_strings = canonical::strings_of(parsed.as_ref(), MIN_ECHO_CHARS);
        drop(parsed);
        let key = call_key(&call.name, &canonical);
        let cycle = judge
            .memory
            .log
            .cycle_period(&key)
            .map(|_| judge.memory.log.cycle_members(&key));
        Slot {
            arg_strings,
            call,
            canonical,
            key,
            semantics,
            plan: Plan::Run,
            cycle,
        }
    }

    /// A call to a skill that is no longer offered goes straight to Finalize: another
    /// round would only cost a model call.
    pub(super) fn withdrawn_called(
        &mut self,
        judge: &Judge,
        slot: &Slot,
        why: &str,
        by: GuardKind,
        trips: &mut Vec<Trip>,
    ) {
        let name = &slot.call.name;
        let what = format!("`{name}` was called although it is not offered ({why})");
        if !judge.policy.loop_detection {
            trips.push(
                Trip::new(GuardKind::WithdrawnSkillCalled, GuardAction::Refused, what).on(name),
            );
            return;
        }
        let evidence = Evidence::new(&slot.call.id, name, &slot.call.arguments, "(not run)");
        self.set_cause(
            FinalizeCause::new(stop_for(by), GuardKind::WithdrawnSkillCalled, what)
                .with_evidence(vec![evidence]),
        );
    }

    /// Keeps the first cause of the round, unless a loop is found after a limit.
    pub(super) fn set_cause(&mut self, cause: FinalizeCause) {
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

    /// Closes the round: the ladder's decay, the answer memory, the progress check, the
    /// budget note, and whether every tool is now withdrawn. `interrupted` when the turn
    /// was cancelled or ran out of time mid-round; `tools` every tool of the toolbox.
    pub(super) fn end(
        mut self,
        judge: &mut Judge,
        interrupted: bool,
        model_calls: u32,
        tools: &[&str],
    ) -> RoundVerdict {
        self.step_ladder_down(judge);
        let normalized = std::mem::take(&mut self.normalized_text);
        if normalized.chars().count() >= judge.policy.repeated_answer_min_chars {
            judge.memory.answers.push(normalized);
        }
        if judge.policy.loop_detection && !interrupted {
            self.judge_progress(judge);
        }
        self.close_tokens(judge);
        let mut notes = Vec::new();
        if !interrupted && self.fatal.is_none() {
            let max = judge.policy.max_model_calls;
            if judge.policy.show_budget && model_calls * 2 >= max {
                self.notes
                    .push(words::budget_note(max.saturating_sub(model_calls), max));
            }
            notes = std::mem::take(&mut self.notes);
        }
        let evidence = std::mem::take(&mut self.withdrawal_evidence);
        let cause = self
            .cause
            .take()
            .or_else(|| all_withdrawn(judge, tools).map(|c| c.with_evidence(evidence)));
        RoundVerdict {
            notes,
            fatal: self.fatal,
            cause,
        }
    }

    /// Closes a booked round (see [`RoundJudge::booked`]): the ladder's decay and the
    /// progress check; returns the cause that ends the turn, if the round shows one.
    pub(super) fn end_booked(mut self, judge: &mut Judge) -> Option<FinalizeCause> {
        self.step_ladder_down(judge);
        if judge.policy.loop_detection {
            self.judge_progress(judge);
        }
        self.close_tokens(judge);
        self.cause
    }

    /// A round with no trip lets the ladder step down; one that made real progress
    /// clears the trips before it.
    fn step_ladder_down(&self, judge: &mut Judge) {
        match (self.rung, self.progress_calls) {
            (Some(_), _) => {}
            (None, 0) => judge.memory.ladder.clean_round(),
            (None, _) => judge.memory.ladder.progress(),
        }
    }

    /// What this round's results brought becomes the latest results; a round that told
    /// the model something new ends every streak of arguments that changed in vain (the
    /// turn is moving: a write that answers as before is no loop when the test after it
    /// fails anew).
    fn close_tokens(&mut self, judge: &mut Judge) {
        judge.memory.latest_tokens = std::mem::take(&mut self.new_tokens);
        if self.informative_calls > 0 {
            judge.memory.echo_streak.clear();
        }
    }
}

/// Finalize when every tool of a non-empty toolbox has been withdrawn by a guard. Tools
/// only declined for want of approval failed at nothing: the model answers without them.
fn all_withdrawn(judge: &Judge, tools: &[&str]) -> Option<FinalizeCause> {
    let withdrawn = &judge.memory.withdrawn;
    if tools.is_empty()
        || !tools.iter().all(|t| withdrawn.contains_key(*t))
        || tools.iter().all(|t| {
            withdrawn
                .get(*t)
                .is_some_and(|w| w.by == GuardKind::Approval)
        })
    {
        return None;
    }
    let guard = judge
        .memory
        .last_withdrawal_by
        .unwrap_or(GuardKind::CircuitBreaker);
    Some(FinalizeCause::new(
        stop_for(guard),
        guard,
        "every tool has been withdrawn".to_owned(),
    ))
}

/// True when `slot` repeats a call the turn already ran, with no new action done since
/// (a test run again after an edit is checking anew).
pub(super) fn repeats_old_ground(judge: &Judge, slot: &Slot) -> bool {
    let log = &judge.memory.log;
    log.last_with_key(&slot.key)
        .is_some_and(|prev| log.actions() == prev.actions_at)
}

/// True when `slot` varies its skill's latest call in one value only, by a counter or
/// growth, with no other new action done since.
pub(super) fn varies_old_ground(judge: &Judge, slot: &Slot) -> bool {
    let log = &judge.memory.log;
    log.last_with_key(&slot.key).is_none()
        && log.last_of(&slot.call.name).is_some_and(|prev| {
            log.actions() == prev.actions_at
                && args_counted_or_grown(&prev.canonical_args, &slot.canonical)
        })
}

/// True when `text` says what an earlier round beside tool calls already said.
fn answer_repeats(judge: &Judge, normalized: &str) -> bool {
    normalized.chars().count() >= judge.policy.repeated_answer_min_chars
        && judge
            .memory
            .answers
            .iter()
            .any(|earlier| text_similarity(earlier, normalized) >= NEAR_ANSWER)
}

/// The outcome a booked call had, from the results that came with the request.
pub(super) fn booked_outcome(content: &str, is_error: bool) -> ToolOutcome {
    ToolOutcome {
        content: content.to_owned(),
        is_error,
        fatal: false,
    }
}
