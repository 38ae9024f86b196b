//! What the judge remembers across the rounds of one turn: plain data that can be
//! serialised, so a turn's judgement can be inspected, stored and replayed.

use std::collections::{BTreeMap, BTreeSet};

use buddy_core::GuardKind;
use serde::{Deserialize, Serialize};

use super::token_set::TokenSet;
use crate::guards::call_log::CallLog;
use crate::guards::ladder::Ladder;
use crate::policy::LoopPolicy;

/// The judge of one turn: its policy and what it remembers. It does no I/O and emits
/// nothing; the driver asks it through its steps (`facade.rs`) and turns its verdicts
/// into events and steps.
#[derive(Clone, Debug)]
pub(crate) struct Judge {
    pub(super) policy: LoopPolicy,
    pub(super) memory: JudgeMemory,
}

impl Judge {
    /// A judge with no memory yet.
    pub(crate) fn new(policy: LoopPolicy) -> Self {
        Judge {
            policy,
            memory: JudgeMemory::default(),
        }
    }

    /// The turn's policy (read by the driver for its own settings: deadlines, grace,
    /// parallelism, the chant detector).
    pub(crate) fn policy(&self) -> &LoopPolicy {
        &self.policy
    }
}

/// A skill taken off the offer for the rest of the turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Withdrawal {
    /// Why, in words the model reads.
    pub why: String,
    /// The guard that did it.
    pub by: GuardKind,
}

/// The judge's memory of one turn.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct JudgeMemory {
    /// Withdrawn skills, by name.
    pub(super) withdrawn: BTreeMap<String, Withdrawal>,
    /// The guard behind the latest withdrawal, named again if it leaves no tools.
    pub(super) last_withdrawal_by: Option<GuardKind>,
    /// Executed calls per skill.
    pub(super) calls_per_skill: BTreeMap<String, u32>,
    /// Failures in a row per skill (the circuit breaker).
    pub(super) consecutive_failures: BTreeMap<String, u32>,
    /// Every executed call and what it returned.
    pub(super) log: CallLog,
    /// The escalation ladder every loop signal climbs.
    pub(super) ladder: Ladder,
    /// Normalised answer texts of earlier rounds that came with tool calls.
    pub(super) answers: Vec<String>,
    /// "No tools after N model calls" has been announced.
    pub(super) tools_withdrawn_announced: bool,
    /// Tool rounds so far (model responses whose calls were run).
    pub(super) rounds: u32,
    /// Call keys the model was already warned about: repeating one again finalizes.
    pub(super) signalled: BTreeSet<String>,
    /// Skills that tripped a guard in this turn (trips on several add up).
    pub(super) tripped_skills: BTreeSet<String>,
    /// Per skill: calls in a row whose arguments changed but whose result did not.
    pub(super) echo_streak: BTreeMap<String, u32>,
    /// Rounds in a row in which every call only repeated an earlier one.
    pub(super) stale_rounds: u32,
    /// Calls dropped from the latest reply for going over `max_calls_per_reply`.
    pub(super) dropped_calls: Option<usize>,
    /// Distinctive tokens (hashed) of every argument and result so far.
    #[serde(with = "super::token_set")]
    pub(super) seen_tokens: TokenSet,
    /// Tokens that first appeared in the latest round's results: a call whose arguments
    /// carry one follows what the model read.
    #[serde(with = "super::token_set")]
    pub(super) latest_tokens: TokenSet,
    /// Replies without an answer that were asked again.
    pub(super) reasks: u32,
    /// Replies cut by the output limit that were asked to continue.
    #[serde(default)]
    pub(super) continuations: u32,
    /// Calls of the latest reply that re-send a call which already ran (same id, same
    /// arguments), by their new id. They never run again: they get that call's result.
    #[serde(default)]
    pub(super) resent: BTreeMap<String, Resent>,
}

/// A call the provider sent again under the id of one that already ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Resent {
    /// The id the call ran under.
    pub earlier: String,
    /// The result it got then.
    pub content: String,
    pub is_error: bool,
}

impl JudgeMemory {
    /// Stops offering `name` for the rest of the turn, remembering which guard did it.
    pub(super) fn withdraw(&mut self, name: &str, why: String, by: GuardKind) {
        self.withdrawn
            .insert(name.to_owned(), Withdrawal { why, by });
        self.last_withdrawal_by = Some(by);
    }

    /// True when `name` is withdrawn.
    pub(super) fn is_withdrawn(&self, name: &str) -> bool {
        self.withdrawn.contains_key(name)
    }
}
