//! A turn's policy: the operator's for its model, lowered by the conversation's and the
//! request's own, then by the key's spend room — every ceiling through the same layering.

use buddy_core::Usd;
use buddy_engine::{LoopPolicy, PolicyPatch};

use crate::backend::Resolved;
use crate::error::AppError;
use crate::state::AppState;

/// The policy of a turn: the operator's for this model, lowered (never raised) by the
/// request's own; one that would raise a limit is a 400 naming it.
pub(crate) fn turn_policy(
    state: &AppState,
    resolved: &Resolved,
    request_policy: &PolicyPatch,
) -> Result<LoopPolicy, AppError> {
    let policies = &state.inner.policy;
    let bad = |e: buddy_engine::PolicyError| AppError::BadRequest(e.to_string());
    let ceiling = policies
        .resolve(&resolved.model, &[&resolved.policy])
        .map_err(bad)?;
    let asked = policies
        .resolve(&resolved.model, &[&resolved.policy, request_policy])
        .map_err(bad)?;
    let raised = asked.raised_above(
        &ceiling,
        &resolved.model,
        state.inner.settings.allow_loop_detection_off,
    );
    if !raised.is_empty() {
        let list: Vec<String> = raised.iter().map(ToString::to_string).collect();
        return Err(AppError::BadRequest(format!(
            "the request's policy asks for more than this server allows: {}. A request may \
             only lower limits; the operator sets them in buddy.toml",
            list.join("; ")
        )));
    }
    Ok(asked)
}

/// The layer the key's spend room puts on a turn's `policy`: a turn may not spend past
/// the key's ceiling, so the room left is its money budget when that is lower. A turn
/// whose model has no known price has no cost to count, and gets no layer.
pub(crate) fn spend_layer(
    policy: &LoopPolicy,
    room: Option<Usd>,
    priced: bool,
) -> Result<PolicyPatch, AppError> {
    let mut layer = PolicyPatch::default();
    if let (Some(room), true) = (room, priced) {
        let budget = policy.max_turn_cost_usd.map_or(room, |b| b.min(room));
        layer
            .set_max_turn_cost_usd(budget)
            .map_err(|e| AppError::Internal(format!("the key's spend room is no budget ({e})")))?;
    }
    Ok(layer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dollars(d: f64) -> Usd {
        Usd::from_dollars(d).unwrap()
    }

    fn with(patch: &PolicyPatch, mut policy: LoopPolicy) -> LoopPolicy {
        policy.apply(patch).unwrap();
        policy
    }

    #[test]
    fn the_spend_room_lowers_the_turn_budget_and_never_raises_it() {
        let open = LoopPolicy::default();
        let room = Some(Usd::from_nanos(1_234_567_891));
        let lowered = with(&spend_layer(&open, room, true).unwrap(), open.clone());
        assert_eq!(lowered.max_turn_cost_usd, room, "exact to the nano");
        let tight = LoopPolicy {
            max_turn_cost_usd: Some(dollars(0.5)),
            ..LoopPolicy::default()
        };
        let kept = with(
            &spend_layer(&tight, Some(dollars(2.0)), true).unwrap(),
            tight.clone(),
        );
        assert_eq!(kept.max_turn_cost_usd, Some(dollars(0.5)));
        assert!(spend_layer(&open, room, false).unwrap().is_empty());
        assert!(spend_layer(&open, None, true).unwrap().is_empty());
    }
}
