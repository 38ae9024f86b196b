//! The operator's policy as a ceiling: a request may tighten a limit, never loosen it.
//! What "loosen" means is each field's `Ceiling` rule in the policy table.

use super::table::Ceiling;
use super::{LoopPolicy, POLICY_FIELDS};
use crate::context::{default_reserve, default_window};

/// One way a request's policy allows more than the operator's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Raised {
    pub field: &'static str,
    /// What the request asked for, in words (`1000`, `off`, `finalize`).
    pub asked: String,
    /// The operator's value, in words.
    pub ceiling: String,
}

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} = {} (this server's limit is {})",
            self.field, self.asked, self.ceiling
        )
    }
}

/// The window a turn of `model` uses under `policy`, and the room left for the request.
fn window_and_room(policy: &LoopPolicy, model: &str) -> (u64, u64) {
    let window = policy
        .context_window
        .unwrap_or_else(|| default_window(model));
    let reserve = policy
        .reserve_output_tokens
        .unwrap_or_else(|| default_reserve(window));
    (window, window.saturating_sub(reserve))
}

impl LoopPolicy {
    /// Every field where this policy (a request's) allows more than `ceiling` (the
    /// operator's) for a turn of `model`; empty when it stays within. Loop detection may
    /// be switched off only when `loop_detection_may_be_off`.
    pub fn raised_above(
        &self,
        ceiling: &LoopPolicy,
        model: &str,
        loop_detection_may_be_off: bool,
    ) -> Vec<Raised> {
        let mut out = Vec::new();
        for field in POLICY_FIELDS {
            let (asked, limit) = ((field.number)(self), (field.number)(ceiling));
            let raised = match field.ceiling {
                // `None` is off: unlimited, the loosest of all.
                Ceiling::AtMost => limit.is_some() && asked.is_none_or(|a| Some(a) > limit),
                Ceiling::AtLeast => asked < limit,
                Ceiling::Window => {
                    window_and_room(self, model).0 > window_and_room(ceiling, model).0
                }
                Ceiling::Reserve => {
                    window_and_room(self, model).1 > window_and_room(ceiling, model).1
                }
                Ceiling::LoopDetection => {
                    ceiling.loop_detection && !self.loop_detection && !loop_detection_may_be_off
                }
                Ceiling::Free => false,
            };
            if !raised {
                continue;
            }
            let ceiling_words = match field.ceiling {
                Ceiling::LoopDetection => {
                    "on; the operator does not let requests switch it off".to_owned()
                }
                Ceiling::Window => format!("{} tokens", window_and_room(ceiling, model).0),
                Ceiling::Reserve => format!(
                    "a reserve that leaves at most {} tokens for the request",
                    window_and_room(ceiling, model).1
                ),
                _ => (field.words)(ceiling),
            };
            out.push(Raised {
                field: field.name,
                asked: (field.words)(self),
                ceiling: ceiling_words,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::OnLimit;
    use serde_json::{Value, json};

    #[test]
    fn lowering_is_fine_and_every_raise_is_named() {
        let ceiling = LoopPolicy {
            max_model_calls: 5,
            max_turn_tokens: Some(10_000),
            ..LoopPolicy::default()
        };
        let lower = LoopPolicy {
            max_model_calls: 3,
            max_turn_tokens: Some(5_000),
            deadline_ms: Some(1_000),
            ..ceiling.clone()
        };
        assert!(lower.raised_above(&ceiling, "gpt-4o", false).is_empty());
        let higher = LoopPolicy {
            max_model_calls: 1000,
            max_turn_tokens: None,
            loop_detection: false,
            chant_repeats: None,
            ..ceiling.clone()
        };
        let raised: Vec<String> = higher
            .raised_above(&ceiling, "gpt-4o", false)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            raised,
            [
                "max_model_calls = 1000 (this server's limit is 5)",
                "loop_detection = false (this server's limit is on; the operator does not let requests switch it off)",
                "chant_repeats = off (this server's limit is 10)",
                "max_turn_tokens = off (this server's limit is 10000)",
            ]
        );
        assert_eq!(higher.raised_above(&ceiling, "gpt-4o", true).len(), 3);
    }

    /// A value of `field` that a request could use to loosen `base`, if the field has one.
    fn loosened(field: &str, base: &LoopPolicy) -> Option<Value> {
        let current = serde_json::to_value(base).ok()?.get(field).cloned()?;
        Some(match (field, current) {
            ("on_limit", _) => json!("finalize"),
            ("loop_detection", _) => json!(false),
            ("honor_stop", _) => json!(false),
            ("show_budget" | "finish_tool" | "unattended_elicitation", _) => return None,
            ("context_window", _) => json!(1_000_000),
            ("reserve_output_tokens", _) => json!(1),
            (_, Value::Number(n)) if n.is_f64() => json!(n.as_f64()? + 0.01),
            (_, Value::Number(n)) => json!(n.as_u64()? + 1),
            (_, Value::Null) => return None,
            (_, other) => panic!("{field}: no loosened value for {other}"),
        })
    }

    /// Fails when a field is added without a ceiling rule that catches a loosening request.
    #[test]
    fn every_field_that_can_be_loosened_is_caught() {
        // An operator who set every field tight.
        let operator = LoopPolicy {
            max_calls_per_skill: Some(5),
            max_stale_rounds: Some(2),
            chant_repeats: Some(5),
            substantive_answer_chars: Some(300),
            honor_stop: true,
            withdraw_tools_after: Some(6),
            max_turn_tokens: Some(50_000),
            max_turn_cost_usd: buddy_core::Usd::from_dollars(2.0),
            deadline_ms: Some(60_000),
            on_limit: OnLimit::Error,
            context_window: Some(16_000),
            reserve_output_tokens: Some(4_000),
            poll_patience: 2,
            finalize_grace_ms: 5_000,
            ..LoopPolicy::default()
        };
        let mut free = Vec::new();
        for field in POLICY_FIELDS {
            let Some(value) = loosened(field.name, &operator) else {
                free.push(field.name);
                continue;
            };
            let mut asked = operator.clone();
            asked
                .apply(
                    &super::super::PolicyPatch::from_value(json!({ field.name: value })).unwrap(),
                )
                .unwrap_or_else(|e| panic!("{}: {e}", field.name));
            let raised = asked.raised_above(&operator, "some-model", false);
            assert!(
                raised.iter().any(|r| r.field == field.name),
                "a request that sets {} = {value} loosens the operator's policy and must be refused",
                field.name
            );
            // Turning it off (0) is the loosest of all for a limit that can be off.
            if field.name != "context_window" && field.name != "reserve_output_tokens" {
                let mut off = operator.clone();
                if off
                    .apply(
                        &super::super::PolicyPatch::from_value(json!({ field.name: 0 }))
                            .unwrap_or_default(),
                    )
                    .is_ok()
                    && (field.number)(&off).is_none()
                {
                    assert!(
                        off.raised_above(&operator, "some-model", false)
                            .iter()
                            .any(|r| r.field == field.name),
                        "{} = off must be refused",
                        field.name
                    );
                }
            }
        }
        assert_eq!(
            free,
            ["unattended_elicitation", "show_budget", "finish_tool"],
            "fields a request may set freely"
        );
    }

    #[test]
    fn the_context_room_may_shrink_never_grow() {
        let operator = LoopPolicy::default();
        let smaller = LoopPolicy {
            context_window: Some(8_000),
            ..LoopPolicy::default()
        };
        assert!(smaller.raised_above(&operator, "gpt-4o", false).is_empty());
        let bigger_reserve = LoopPolicy {
            reserve_output_tokens: Some(8_000),
            ..LoopPolicy::default()
        };
        assert!(
            bigger_reserve
                .raised_above(&operator, "gpt-4o", false)
                .is_empty()
        );
        let less_reserve = LoopPolicy {
            reserve_output_tokens: Some(100),
            ..LoopPolicy::default()
        };
        let raised = less_reserve.raised_above(&operator, "gpt-4o", false);
        assert_eq!(raised.len(), 1, "{raised:?}");
        assert_eq!(raised[0].field, "reserve_output_tokens");
        let wider = LoopPolicy {
            context_window: Some(900_000),
            ..LoopPolicy::default()
        };
        assert_eq!(
            wider.raised_above(&operator, "gpt-4o", false)[0].to_string(),
            "context_window = 900000 (this server's limit is 128000 tokens)"
        );
    }
}
