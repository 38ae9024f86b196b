//! What an executed call's result says about a loop: the same action again bringing
//! nothing new (identical, flipping among earlier results, or differing only in its
//! numbers), a cycle of such calls, or arguments that keep changing while the result does
//! not. Each is a [`Signal`] for the escalation ladder of `signals.rs`: the first trip
//! warns, and only a model that keeps at it is stopped.

use buddy_core::{Evidence, GuardKind, RepeatSemantics, ToolOutcome};

use super::memory::Judge;
use super::round::Slot;
use super::signal::{Signal, bump};
use crate::guards::call_log::CallRecord;
use crate::guards::similarity::args_near;
use crate::words;

/// Unchanged results in a row an undeclared (observed) skill may return for the same
/// arguments, with nothing new done in between, before the model is warned: the fifth
/// identical result in a row adds a note (what repeats, the evidence, what to do
/// instead), and the turn goes on.
pub(crate) const OBSERVED_PATIENCE: u32 = 4;

/// Unchanged results in a row after which the repeat is a loop beyond doubt and the turn
/// goes to Finalize: the eighth identical result in a row (a job that answers "running"
/// seven times and then finishes still completes; a model that changes course after the
/// note goes on).
pub(crate) const REPEAT_END: u32 = 7;

/// For a cycle of calls (period 2..=4) whose every call since this one brought nothing
/// new: the unchanged results of a member at which the model is warned (the fourth
/// period).
pub(crate) const CYCLE_WARN: u32 = 3;

/// For such a cycle: the unchanged results of a member at which the turn ends (the fifth
/// period).
pub(crate) const CYCLE_END: u32 = 4;

/// Calls in a row of one skill whose arguments only varied a little (one value growing
/// or shrinking by whole words: a query rewritten word by word) while the result stayed
/// the same, after which the next such call is a loop signal. Slow on purpose: each of
/// them is still a new action, and a false stop loses the user's task where a missed loop costs a few calls.
pub(crate) const NEAR_DUPLICATE_STREAK: u32 = 4;

/// What `observe` found out about a call before judging it.
pub(super) struct Facts<'a> {
    /// The latest call with the same arguments.
    pub(super) earlier: Option<&'a CallRecord>,
    /// Results in a row with nothing the call had not returned before.
    pub(super) unchanged: u32,
    pub(super) fingerprint: u64,
    /// The arguments carry a token the latest results first said.
    pub(super) follows: bool,
    /// The result differs from the latest of the same call only in its numbers.
    pub(super) near: bool,
}

/// The loop signal an executed call's result gives, if any: the same call bringing
/// nothing new again, a cycle whose calls bring nothing new, or arguments that keep
/// changing while the result (less its echo and noise) stays the same.
pub(super) fn judge_result(
    judge: &mut Judge,
    slot: &Slot,
    outcome: &ToolOutcome,
    facts: Facts<'_>,
) -> Option<Signal> {
    if let Some(prev) = facts.earlier
        && facts.unchanged > 0
    {
        return repeat(judge, slot, outcome, &facts, prev);
    }
    if outcome.is_error || facts.earlier.is_some() {
        return None;
    }
    near_duplicate(judge, slot, outcome, &facts)
}

/// The earlier call and this one, as a signal's evidence.
fn evidence_with(prev: &CallRecord, slot: &Slot, outcome: &ToolOutcome) -> Vec<Evidence> {
    vec![
        prev.evidence(),
        Evidence::new(
            &slot.call.id,
            &slot.call.name,
            &slot.call.arguments,
            &outcome.content,
        ),
    ]
}

/// The same call again with nothing new (`facts.unchanged` times in a row after `prev`):
/// a warning at the fifth, the end at the eighth (a cycle: its fourth and fifth period).
fn repeat(
    judge: &mut Judge,
    slot: &Slot,
    outcome: &ToolOutcome,
    facts: &Facts<'_>,
    prev: &CallRecord,
) -> Option<Signal> {
    let name = slot.call.name.as_str();
    let signalled = judge.memory.signalled.contains(&slot.key);
    let unchanged = facts.unchanged;
    let times = unchanged + 1;
    let latest = words::excerpt(&outcome.content, 160);
    let what = if facts.near {
        format!(
            "`{name}` was called with the same arguments {times} times in a row, with nothing else done in \
             between, and its results differed only in their numbers (counts, sizes, line numbers, ids); \
             the latest: {latest}"
        )
    } else if prev.fingerprint == facts.fingerprint {
        format!(
            "`{name}` was called with the same arguments and returned the same result {times} times in a \
             row: {latest}"
        )
    } else {
        format!(
            "`{name}` was called with the same arguments and, {times} times in a row, returned only results \
             it had returned before; the latest: {latest}"
        )
    };
    let base = Signal {
        guard: GuardKind::Repetition,
        skill: name.to_owned(),
        key: slot.key.clone(),
        what,
        evidence: evidence_with(prev, slot, outcome),
        members: Vec::new(),
        certain: false,
        ran: true,
        left: None,
    };
    if slot.semantics == RepeatSemantics::Pollable {
        return (unchanged > judge.policy.poll_patience).then_some(Signal {
            certain: signalled,
            ..base
        });
    }
    // More looks are normal (a job still running; several jobs polled in turn, which
    // is a cycle of the same calls and results): the fifth result in a row with
    // nothing new earns a warning, and only a model that keeps at it is stopped, at
    // the eighth. A cycle whose every call since this one brought nothing new is
    // warned at its fourth period and ended at its fifth.
    let cycle = slot
        .cycle
        .as_ref()
        .filter(|_| judge.memory.log.nothing_new_since(&slot.key));
    let (warn_at, end_at) = match cycle {
        Some(_) => (CYCLE_WARN, CYCLE_END),
        None => (OBSERVED_PATIENCE, REPEAT_END),
    };
    let guard = match cycle {
        Some(_) => GuardKind::Cycle,
        None => GuardKind::Repetition,
    };
    if unchanged >= end_at {
        return Some(Signal {
            certain: true,
            guard,
            ..base
        });
    }
    // One warning per loop: a call already warned about, or a cycle one of whose
    // calls was, runs on until the end comes.
    let warned = signalled
        || cycle.is_some()
            && judge
                .memory
                .log
                .signalled_since(&slot.key, &judge.memory.signalled);
    if unchanged >= warn_at && !warned {
        return Some(Signal {
            guard,
            left: Some(end_at - unchanged),
            members: cycle.cloned().unwrap_or_default(),
            ..base
        });
    }
    None
}

/// A query rewritten word by word while its result stays the same: a near-duplicate streak.
fn near_duplicate(
    judge: &mut Judge,
    slot: &Slot,
    outcome: &ToolOutcome,
    facts: &Facts<'_>,
) -> Option<Signal> {
    let name = slot.call.name.as_str();
    // Near-duplicates: compared with this skill's latest call from an earlier round,
    // never with calls of the same response (a parallel batch is not a repeat). Arguments
    // that carry what the latest results said are the model following them: no echo.
    let memory = &mut judge.memory;
    let prev = memory.log.last_of_before_round(name, memory.rounds)?;
    // The cheap comparisons first: most calls get a result of their own.
    let echo = !prev.is_error
        && !facts.follows
        && prev.fingerprint == facts.fingerprint
        && args_near(&prev.canonical_args, &slot.canonical);
    let mut streak = 0;
    bump(&mut memory.echo_streak, name, |n| {
        *n = if echo { *n + 1 } else { 0 };
        streak = *n;
    });
    if !echo {
        return None;
    }
    (streak >= NEAR_DUPLICATE_STREAK).then(|| Signal {
        guard: GuardKind::NearDuplicate,
        skill: name.to_owned(),
        key: String::new(),
        what: format!(
            "`{name}` was called with changed arguments {} times in a row and its result, less what it \
             echoes of them and its timestamps and ids, stayed the same",
            streak + 1
        ),
        evidence: evidence_with(prev, slot, outcome),
        members: Vec::new(),
        certain: false,
        ran: true,
        left: None,
    })
}
