//! The limits checked before each model call, and which tools the call may offer.

use buddy_core::{GuardAction, GuardKind, StopReason, TurnStats};

use super::memory::JudgeMemory;
use super::verdict::{FinalizeCause, Trip};
use crate::policy::{LoopPolicy, OnLimit};

/// A limit reached before the next model call, if any. The last model call is reserved
/// for the Finalize call (unless `on_limit = "error"`, which makes none).
pub(crate) fn limit_cause(
    policy: &LoopPolicy,
    stats: &TurnStats,
    deadline_passed: bool,
) -> Option<FinalizeCause> {
    let calls = stats.model_calls;
    let capped = match policy.on_limit {
        OnLimit::Finalize => calls + 1 >= policy.max_model_calls,
        OnLimit::Error => calls >= policy.max_model_calls,
    };
    if capped {
        return Some(FinalizeCause::new(
            StopReason::MaxModelCalls,
            GuardKind::ModelCallLimit,
            format!("{calls} of {} model calls used", policy.max_model_calls),
        ));
    }
    if deadline_passed {
        return Some(FinalizeCause::deadline(policy.deadline_ms));
    }
    if let Some(budget) = policy.max_turn_tokens {
        let used = stats.input_tokens + stats.output_tokens;
        if used >= budget {
            return Some(FinalizeCause::new(
                StopReason::TokenBudget,
                GuardKind::TokenBudget,
                format!("{used} of {budget} tokens used"),
            ));
        }
    }
    None
}

/// What the next model call may offer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Offer {
    /// No tools at all (a plain chat call); the trip announces it the first time.
    Nothing(Option<Trip>),
    /// Every tool not withdrawn (and `finish` when the policy offers it).
    Tools,
}

/// Whether the next call offers tools: none once `withdraw_tools_after` model calls are made.
pub(crate) fn offer(policy: &LoopPolicy, memory: &mut JudgeMemory, model_calls: u32) -> Offer {
    let Some(after) = policy.withdraw_tools_after else {
        return Offer::Tools;
    };
    if model_calls < after {
        return Offer::Tools;
    }
    let announce = !std::mem::replace(&mut memory.tools_withdrawn_announced, true);
    Offer::Nothing(announce.then(|| {
        Trip::new(
            GuardKind::ToolsWithdrawn,
            GuardAction::WithdrewAllTools,
            format!("no tools are offered after {after} model calls (policy withdraw_tools_after)"),
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(model_calls: u32, tokens: u64) -> TurnStats {
        TurnStats {
            model_calls,
            input_tokens: tokens,
            ..TurnStats::default()
        }
    }

    #[test]
    fn the_last_model_call_is_reserved_for_finalize() {
        let p = LoopPolicy {
            max_model_calls: 5,
            ..LoopPolicy::default()
        };
        assert_eq!(limit_cause(&p, &stats(3, 0), false), None);
        let cause = limit_cause(&p, &stats(4, 0), false).expect("capped");
        assert_eq!(cause.reason, StopReason::MaxModelCalls);
        assert_eq!(cause.detail, "4 of 5 model calls used");
        let error = LoopPolicy {
            on_limit: OnLimit::Error,
            ..p
        };
        assert_eq!(
            limit_cause(&error, &stats(4, 0), false),
            None,
            "no call reserved"
        );
        assert!(limit_cause(&error, &stats(5, 0), false).is_some());
    }

    #[test]
    fn the_token_budget_trips_when_used_reaches_it() {
        let p = LoopPolicy {
            max_turn_tokens: Some(100),
            ..LoopPolicy::default()
        };
        assert_eq!(limit_cause(&p, &stats(1, 99), false), None);
        assert_eq!(
            limit_cause(&p, &stats(1, 100), false).map(|c| c.reason),
            Some(StopReason::TokenBudget)
        );
        assert_eq!(
            limit_cause(&p, &stats(1, 0), true).map(|c| c.reason),
            Some(StopReason::Deadline)
        );
    }

    #[test]
    fn tools_are_withdrawn_after_n_calls_and_announced_once() {
        let p = LoopPolicy {
            withdraw_tools_after: Some(2),
            ..LoopPolicy::default()
        };
        let mut memory = JudgeMemory::default();
        assert_eq!(offer(&p, &mut memory, 1), Offer::Tools);
        assert!(matches!(offer(&p, &mut memory, 2), Offer::Nothing(Some(_))));
        assert_eq!(offer(&p, &mut memory, 3), Offer::Nothing(None));
        assert_eq!(
            offer(&LoopPolicy::default(), &mut JudgeMemory::default(), 100),
            Offer::Tools
        );
    }
}
