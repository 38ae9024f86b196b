//! What the judge returns: guard trips for the driver to announce, and where the turn
//! goes next. Plain data; the driver turns them into events and steps.

use buddy_core::{Evidence, GuardAction, GuardKind, StopReason};
use serde::{Deserialize, Serialize};

/// A guard acted: the driver announces it as a `guard_tripped` event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Trip {
    pub guard: GuardKind,
    pub action: GuardAction,
    pub skill: Option<String>,
    pub detail: String,
    /// The calls (and their results) that made the guard act, oldest first.
    pub evidence: Vec<Evidence>,
}

impl Trip {
    /// A trip with no call evidence.
    pub(crate) fn new(guard: GuardKind, action: GuardAction, detail: impl Into<String>) -> Self {
        Trip {
            guard,
            action,
            skill: None,
            detail: detail.into(),
            evidence: Vec::new(),
        }
    }

    /// The same trip, about `skill`.
    pub(crate) fn on(mut self, skill: &str) -> Self {
        self.skill = Some(skill.to_owned());
        self
    }

    /// The same trip, naming the calls that made the guard act.
    pub(crate) fn with_evidence(mut self, evidence: Vec<Evidence>) -> Self {
        self.evidence = evidence;
        self
    }
}

/// Why the turn goes to Finalize, and the guard to name in the event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FinalizeCause {
    pub reason: StopReason,
    pub guard: GuardKind,
    pub detail: String,
    /// The calls that made the guard act, for the event.
    pub evidence: Vec<Evidence>,
}

impl FinalizeCause {
    /// A cause with no call evidence (limits, deadlines).
    pub(crate) fn new(reason: StopReason, guard: GuardKind, detail: String) -> Self {
        FinalizeCause {
            reason,
            guard,
            detail,
            evidence: Vec::new(),
        }
    }

    /// The same cause, naming the calls that made the guard act.
    pub(crate) fn with_evidence(mut self, evidence: Vec<Evidence>) -> Self {
        self.evidence = evidence;
        self
    }

    /// The turn's deadline passed.
    pub(crate) fn deadline(deadline_ms: Option<u64>) -> Self {
        FinalizeCause::new(
            StopReason::Deadline,
            GuardKind::Deadline,
            format!(
                "the turn's deadline of {} ms passed",
                deadline_ms.unwrap_or_default()
            ),
        )
    }

    /// The trip that announces this cause with `action` (finalize, or error).
    pub(crate) fn trip(&self, action: GuardAction) -> Trip {
        Trip::new(self.guard, action, self.detail.clone()).with_evidence(self.evidence.clone())
    }
}

/// Guards that detect loops (as opposed to limits and failures): a Finalize they cause
/// ends `loop_detected`, while limits and failures end `tools_exhausted` and the like.
pub(crate) fn is_loop_guard(guard: GuardKind) -> bool {
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

/// The stop reason of a Finalize caused by `guard`.
pub(crate) fn stop_for(guard: GuardKind) -> StopReason {
    if is_loop_guard(guard) {
        StopReason::LoopDetected
    } else {
        StopReason::ToolsExhausted
    }
}
