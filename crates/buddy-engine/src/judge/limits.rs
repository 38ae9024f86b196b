//! The limits checked before each model call, and which tools the call may offer.

use buddy_core::{GuardAction, GuardKind, StopReason, TurnStats, Usd};

use super::memory::JudgeMemory;
use super::verdict::{FinalizeCause, Trip};
use crate::budget::TreeStop;
use crate::policy::{LoopPolicy, OnLimit};

/// A limit reached before the next model call, if any. The last model call is reserved
/// for the Finalize call (unless `on_limit = "error"`, which makes none); so is the money
/// the Finalize call will cost, estimated, like the next call, at `last_call`'s cost.
pub(crate) fn limit_cause(
    policy: &LoopPolicy,
    stats: &TurnStats,
    deadline_passed: bool,
    last_call: Option<Usd>,
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
    if let Some(budget) = policy.max_turn_cost_usd {
        let spent = stats.cost_usd.unwrap_or_default();
        let next = last_call.unwrap_or_default();
        let calls = match policy.on_limit {
            OnLimit::Finalize => 2,
            OnLimit::Error => 1,
        };
        if !affords(policy, stats, last_call, calls) || spent >= budget {
            return Some(FinalizeCause::new(
                StopReason::CostBudget,
                GuardKind::CostBudget,
                format!(
                    "{spent} of {budget} spent; the next call would cost about {next}{}",
                    match policy.on_limit {
                        OnLimit::Finalize => ", and the answer as much again",
                        OnLimit::Error => "",
                    }
                ),
            ));
        }
    }
    None
}

/// Whether `calls` more model calls, each estimated at `last_call`'s cost, stay within
/// the turn's money budget (always, without a budget or before any call was priced).
pub(crate) fn affords(
    policy: &LoopPolicy,
    stats: &TurnStats,
    last_call: Option<Usd>,
    calls: u64,
) -> bool {
    match (policy.max_turn_cost_usd, last_call) {
        (Some(budget), Some(next)) => {
            let reserved = Usd::from_nanos(next.nanos().saturating_mul(calls));
            stats.cost_usd.unwrap_or_default().saturating_add(reserved) <= budget
        }
        _ => true,
    }
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

/// A stop of the turn's tree of agents as the Finalize it causes.
pub(crate) fn tree_cause(stop: TreeStop) -> FinalizeCause {
    match stop {
        TreeStop::Calls { max, used } => FinalizeCause::new(
            StopReason::MaxModelCalls,
            GuardKind::ModelCallLimit,
            format!(
                "{used} of the {max} model calls this turn and its sub-agents share are used, the rest held for answers"
            ),
        ),
        TreeStop::Tokens { budget, used } => FinalizeCause::new(
            StopReason::TokenBudget,
            GuardKind::TokenBudget,
            format!("{used} of {budget} tokens used by this turn and its sub-agents"),
        ),
        TreeStop::Cost {
            budget,
            spent,
            next,
        } => FinalizeCause::new(
            StopReason::CostBudget,
            GuardKind::CostBudget,
            format!(
                "{spent} of {budget} spent by this turn and its sub-agents; the next call would cost about {next}, and the answer as much again"
            ),
        ),
    }
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
        assert_eq!(limit_cause(&p, &stats(3, 0), false, None), None);
        let cause = limit_cause(&p, &stats(4, 0), false, None).expect("capped");
        assert_eq!(cause.reason, StopReason::MaxModelCalls);
        assert_eq!(cause.detail, "4 of 5 model calls used");
        let error = LoopPolicy {
            on_limit: OnLimit::Error,
            ..p
        };
        assert_eq!(
            limit_cause(&error, &stats(4, 0), false, None),
            None,
            "no call reserved"
        );
        assert!(limit_cause(&error, &stats(5, 0), false, None).is_some());
    }

    #[test]
    fn the_token_budget_trips_when_used_reaches_it() {
        let p = LoopPolicy {
            max_turn_tokens: Some(100),
            ..LoopPolicy::default()
        };
        assert_eq!(limit_cause(&p, &stats(1, 99), false, None), None);
        assert_eq!(
            limit_cause(&p, &stats(1, 100), false, None).map(|c| c.reason),
            Some(StopReason::TokenBudget)
        );
        assert_eq!(
            limit_cause(&p, &stats(1, 0), true, None).map(|c| c.reason),
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

    #[test]
    fn the_money_budget_keeps_room_for_the_next_call_and_the_answer() {
        let dollars = |d: f64| Usd::from_dollars(d).unwrap();
        let p = LoopPolicy {
            max_turn_cost_usd: Some(dollars(1.0)),
            ..LoopPolicy::default()
        };
        let spent = |d: f64| TurnStats {
            model_calls: 3,
            cost_usd: Some(dollars(d)),
            ..TurnStats::default()
        };
        // Nothing spent yet: the first call is made whatever it may cost.
        assert_eq!(limit_cause(&p, &TurnStats::default(), false, None), None);
        // 0.50 spent, calls cost 0.20: the next (0.70) and the answer (0.90) fit.
        assert_eq!(
            limit_cause(&p, &spent(0.5), false, Some(dollars(0.2))),
            None
        );
        // 0.70 spent: the next call and the answer would reach 1.10.
        let cause = limit_cause(&p, &spent(0.7), false, Some(dollars(0.2))).expect("stops");
        assert_eq!(cause.reason, StopReason::CostBudget);
        assert_eq!(
            cause.detail,
            "$0.7000 of $1.0000 spent; the next call would cost about $0.2000, and the answer as much again"
        );
        // Under on_limit = "error" no answer call is reserved.
        let error = LoopPolicy {
            on_limit: OnLimit::Error,
            ..p.clone()
        };
        assert_eq!(
            limit_cause(&error, &spent(0.7), false, Some(dollars(0.2))),
            None
        );
        assert!(limit_cause(&error, &spent(1.0), false, Some(dollars(0.0))).is_some());
    }
}
