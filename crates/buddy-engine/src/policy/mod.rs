//! `LoopPolicy`: every limit and loop guard of a turn, declared once in a table
//! (`fields.rs`) that drives defaults, validation, ceilings, layered patches (file,
//! per-model patterns, environment, flags, per request) and the command-line flags.

mod ceiling;
mod fields;
mod patch;
pub(crate) mod table;

use serde::{Deserialize, Serialize};

pub use ceiling::Raised;
pub use fields::{LoopPolicy, POLICY_FIELDS};
pub use patch::{PolicyConfig, PolicyPatch};
pub use table::{Ceiling, Check, Field, Flag};

/// What happens when a limit or loop guard ends a turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnLimit {
    /// Ask the model once more, without tools, for an answer from what it has.
    #[default]
    Finalize,
    /// End the turn with an error event instead.
    Error,
}

/// What an unattended turn (nobody to ask) answers a tool's elicitation request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnattendedElicitation {
    /// "No": the tool goes on without the values.
    #[default]
    Decline,
    /// Dismissed: the tool drops what it asked for.
    Cancel,
    /// "Yes" with the form's own defaults, when every required field has one (MCP's
    /// SEP-1034); otherwise decline.
    Defaults,
}

/// A policy setting that is wrong, naming the field (or variable) and what is expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("unknown policy field `{field}`; known fields: {known}")]
    UnknownField { field: String, known: String },
    #[error("policy field `{field}`: {message}")]
    InvalidValue { field: String, message: String },
    #[error("policy field `{field}` is {value}, expected {expected}")]
    OutOfRange {
        field: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("environment variable {var}: {source}")]
    Env {
        var: String,
        #[source]
        source: Box<PolicyError>,
    },
}

impl LoopPolicy {
    /// Every field name, in declaration order.
    pub fn field_names() -> Vec<String> {
        POLICY_FIELDS.iter().map(|f| f.name.to_owned()).collect()
    }

    /// The table entry of field `name`.
    pub fn field(name: &str) -> Option<&'static Field> {
        POLICY_FIELDS.iter().find(|f| f.name == name)
    }

    /// Checks every value is in range.
    pub fn validate(&self) -> Result<(), PolicyError> {
        for field in POLICY_FIELDS {
            if let (Check::Range { lo, hi, expected }, Some(n)) =
                (field.check, (field.number)(self))
                && (n < lo || n > hi)
            {
                return Err(PolicyError::OutOfRange {
                    field: field.name,
                    value: (field.words)(self),
                    expected,
                });
            }
        }
        if let (Some(reserve), Some(window)) = (self.reserve_output_tokens, self.context_window)
            && reserve >= window / 2
        {
            return Err(PolicyError::OutOfRange {
                field: "reserve_output_tokens",
                value: reserve.to_string(),
                expected: "less than half of context_window",
            });
        }
        Ok(())
    }

    /// Applies a patch on top of this policy and validates the result.
    pub fn apply(&mut self, patch: &PolicyPatch) -> Result<(), PolicyError> {
        if patch.is_empty() {
            return Ok(());
        }
        let mut next = self.clone();
        patch.set_in(&mut next);
        next.normalize_off_values();
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// `Some(0)` of every optional field becomes off.
    pub(crate) fn normalize_off_values(&mut self) {
        for field in POLICY_FIELDS {
            (field.normalize)(self);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn defaults_match_the_design_table() {
        let p = LoopPolicy::default();
        assert_eq!(p.max_model_calls, 150);
        assert_eq!(p.max_tool_calls, 600);
        assert_eq!(p.max_consecutive_failures, 3);
        assert_eq!(p.max_calls_per_skill, None);
        assert_eq!(p.substantive_answer_chars, None);
        assert!(p.loop_detection && p.show_budget && !p.honor_stop && !p.finish_tool);
        p.validate().unwrap();
    }

    #[test]
    fn the_table_names_every_serialized_field_in_order() {
        let serialized = match serde_json::to_value(LoopPolicy::default()).unwrap() {
            Value::Object(map) => map.keys().cloned().collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        let mut table = LoopPolicy::field_names();
        let mut sorted = serialized.clone();
        sorted.sort();
        table.sort();
        assert_eq!(table, sorted);
        for field in POLICY_FIELDS {
            assert!(!field.summary().is_empty(), "{} has no doc", field.name);
        }
    }

    #[test]
    fn every_range_is_enforced_at_its_bounds() {
        for field in POLICY_FIELDS {
            let Check::Range { lo, hi, .. } = field.check else {
                continue;
            };
            let accepts =
                |v: u64| PolicyPatch::from_value(json!({ field.name: (field.json)(v) })).is_ok();
            assert!(accepts(lo), "{} = {lo} is in range", field.name);
            assert!(accepts(hi), "{} = {hi} is in range", field.name);
            if hi < u64::MAX {
                assert!(
                    !accepts(hi + 1),
                    "{} = {} is out of range",
                    field.name,
                    hi + 1
                );
            }
            // Below 1 is 0, which turns an optional field off.
            if lo >= 2 {
                assert!(
                    !accepts(lo - 1),
                    "{} = {} is out of range",
                    field.name,
                    lo - 1
                );
            }
        }
    }

    #[test]
    fn unknown_and_out_of_range_fields_are_named() {
        let err = PolicyPatch::from_value(json!({"max_modle_calls": 3})).unwrap_err();
        assert!(err.to_string().contains("max_modle_calls"), "{err}");
        let err = PolicyPatch::from_value(json!({"max_model_calls": 1})).unwrap_err();
        assert!(err.to_string().contains("max_model_calls"), "{err}");
        let err = PolicyPatch::from_value(json!({"max_tool_calls": "many"})).unwrap_err();
        assert!(err.to_string().contains("max_tool_calls"), "{err}");
        let err = PolicyPatch::from_value(json!({"on_limit": "explode"})).unwrap_err();
        assert!(err.to_string().contains("on_limit"), "{err}");
    }

    #[test]
    fn zero_turns_an_optional_guard_off() {
        let mut p = LoopPolicy::default();
        p.apply(&PolicyPatch::from_value(json!({"substantive_answer_chars": 200})).unwrap())
            .unwrap();
        assert_eq!(p.substantive_answer_chars, Some(200));
        p.apply(&PolicyPatch::from_value(json!({"substantive_answer_chars": 0})).unwrap())
            .unwrap();
        assert_eq!(p.substantive_answer_chars, None);
    }

    #[test]
    fn env_vars_override_and_bad_ones_are_named() {
        let patch = PolicyPatch::from_env([
            ("BUDDY_MAX_MODEL_CALLS", "10"),
            ("BUDDY_ON_LIMIT", "error"),
            ("PATH", "/bin"),
            ("BUDDY_UNRELATED", "x"),
        ])
        .unwrap();
        let mut p = LoopPolicy::default();
        p.apply(&patch).unwrap();
        assert_eq!(p.max_model_calls, 10);
        assert_eq!(p.on_limit, OnLimit::Error);
        let err = PolicyPatch::from_env([("BUDDY_MAX_TOOL_CALLS", "lots")]).unwrap_err();
        assert!(err.to_string().contains("BUDDY_MAX_TOOL_CALLS"), "{err}");
    }

    #[test]
    fn model_patterns_apply_from_least_to_most_specific() {
        let config: PolicyConfig = serde_json::from_value(json!({
            "max_model_calls": 30,
            "model": {
                "*": {"max_tool_calls": 40},
                "qwen*": {"max_model_calls": 12},
                "qwen2.5-*": {"max_model_calls": 8},
            }
        }))
        .unwrap();
        let p = config.resolve("qwen2.5-coder", &[]).unwrap();
        assert_eq!((p.max_model_calls, p.max_tool_calls), (8, 40));
        let p = config.resolve("gpt-4o", &[]).unwrap();
        assert_eq!((p.max_model_calls, p.max_tool_calls), (30, 40));
        let flags = PolicyPatch::from_value(json!({"max_model_calls": 5})).unwrap();
        let p = config.resolve("qwen2.5-coder", &[&flags]).unwrap();
        assert_eq!(p.max_model_calls, 5);
    }
}
