//! `LoopPolicy`: every limit and loop guard of a turn, with defaults, validation and
//! layered overrides (file, per-model patterns, environment, flags, per request).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::glob::glob_match;

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

/// The limits and guards of one turn. Defaults follow design.md's guard table.
///
/// Optional guards are `None` when off; in a patch, `0` (or JSON `null`) turns them off.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoopPolicy {
    /// Model calls per turn, the last one reserved for the Finalize call.
    pub max_model_calls: u32,
    /// Tool calls per turn; then Finalize.
    pub max_tool_calls: u32,
    /// Calls of any one skill per turn before it is withdrawn (off by default).
    pub max_calls_per_skill: Option<u32>,
    /// Consecutive failures of one skill before it is withdrawn (the circuit breaker).
    pub max_consecutive_failures: u32,
    /// Repetition, cycle, near-duplicate and repeated-answer detection.
    pub loop_detection: bool,
    /// Unchanged results a pollable skill may return for the same arguments before it counts as a loop.
    pub poll_patience: u32,
    /// Guard trips (on any skills) after which the turn goes to Finalize.
    pub max_guard_trips: u32,
    /// Rounds in a row that bring nothing new (every call failed, or repeated an earlier
    /// call with the same result) after which the turn goes to Finalize; off with 0.
    pub max_stale_rounds: Option<u32>,
    /// A reply whose end repeats one chunk of `chant_min_chars` this many times in a row
    /// is cut (stop reason `repetitive_output`); off with 0.
    pub chant_repeats: Option<u32>,
    /// The shortest chunk that counts as chanting, in bytes.
    pub chant_min_chars: usize,
    /// Answer text shorter than this is narration and never counts as a repeated answer.
    pub repeated_answer_min_chars: usize,
    /// Text at least this long beside tool calls is taken as the final answer (off by default).
    pub substantive_answer_chars: Option<usize>,
    /// Trust `finish_reason: stop` even when tool calls come with it.
    pub honor_stop: bool,
    /// Tell the model "N of M model calls left" in tool results once half are spent.
    pub show_budget: bool,
    /// Offer no tools after this many model calls (off by default).
    pub withdraw_tools_after: Option<u32>,
    /// Offer a `finish(answer)` tool that ends the turn.
    pub finish_tool: bool,
    /// Input plus output tokens per turn; then Finalize (off by default).
    pub max_turn_tokens: Option<u64>,
    /// Wall-clock budget of a turn in milliseconds; then Finalize (off by default).
    pub deadline_ms: Option<u64>,
    /// Time the Finalize call gets, whatever ended the turn; past it buddy answers from
    /// the tool results. A turn with a deadline ends by deadline + this grace.
    pub finalize_grace_ms: u64,
    /// What a tripped limit or loop guard does.
    pub on_limit: OnLimit,
    /// Tool calls of one response that run at the same time.
    pub max_parallel_tools: u32,
    /// Tool calls one response may ask for; the excess get an error result the model reads.
    pub max_calls_per_reply: u32,
    /// The model's context window in tokens (default: buddy's table of common models).
    pub context_window: Option<u64>,
    /// Tokens kept free for the reply (default: a quarter of the window, at most 4,096).
    pub reserve_output_tokens: Option<u64>,
}

impl Default for LoopPolicy {
    fn default() -> Self {
        LoopPolicy {
            max_model_calls: 25,
            max_tool_calls: 25,
            max_calls_per_skill: None,
            max_consecutive_failures: 3,
            loop_detection: true,
            poll_patience: 4,
            max_guard_trips: 3,
            max_stale_rounds: Some(3),
            chant_repeats: Some(10),
            chant_min_chars: 50,
            repeated_answer_min_chars: 80,
            substantive_answer_chars: None,
            honor_stop: false,
            show_budget: true,
            withdraw_tools_after: None,
            finish_tool: false,
            max_turn_tokens: None,
            deadline_ms: None,
            finalize_grace_ms: 10_000,
            on_limit: OnLimit::Finalize,
            max_parallel_tools: 4,
            max_calls_per_reply: 128,
            context_window: None,
            reserve_output_tokens: None,
        }
    }
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
        match serde_json::to_value(LoopPolicy::default()) {
            Ok(Value::Object(map)) => map.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// Checks every value is in range.
    pub fn validate(&self) -> Result<(), PolicyError> {
        fn range<T: PartialOrd + ToString>(
            field: &'static str,
            value: T,
            lo: T,
            hi: T,
            expected: &'static str,
        ) -> Result<(), PolicyError> {
            if value < lo || value > hi {
                return Err(PolicyError::OutOfRange {
                    field,
                    value: value.to_string(),
                    expected,
                });
            }
            Ok(())
        }
        range(
            "max_model_calls",
            self.max_model_calls,
            2,
            1000,
            "2..=1000 (one call is reserved to answer)",
        )?;
        range(
            "max_tool_calls",
            self.max_tool_calls,
            1,
            10_000,
            "1..=10000",
        )?;
        range(
            "max_consecutive_failures",
            self.max_consecutive_failures,
            1,
            1000,
            "1..=1000",
        )?;
        range("poll_patience", self.poll_patience, 0, 1000, "0..=1000")?;
        range(
            "max_calls_per_reply",
            self.max_calls_per_reply,
            1,
            100_000,
            "1..=100000",
        )?;
        range(
            "finalize_grace_ms",
            self.finalize_grace_ms,
            100,
            600_000,
            "100..=600000",
        )?;
        range("max_guard_trips", self.max_guard_trips, 1, 1000, "1..=1000")?;
        range(
            "chant_min_chars",
            self.chant_min_chars,
            8,
            1_000_000,
            "8..=1000000",
        )?;
        if let Some(v) = self.max_stale_rounds {
            range("max_stale_rounds", v, 1, 1000, "1..=1000, or 0 for off")?;
        }
        if let Some(v) = self.chant_repeats {
            range("chant_repeats", v, 2, 10_000, "2..=10000, or 0 for off")?;
        }
        range(
            "repeated_answer_min_chars",
            self.repeated_answer_min_chars,
            1,
            1_000_000,
            "1..=1000000",
        )?;
        range(
            "max_parallel_tools",
            self.max_parallel_tools,
            1,
            64,
            "1..=64",
        )?;
        if let Some(v) = self.max_calls_per_skill {
            range(
                "max_calls_per_skill",
                v,
                1,
                10_000,
                "1..=10000, or 0 for off",
            )?;
        }
        if let Some(v) = self.withdraw_tools_after {
            range("withdraw_tools_after", v, 1, 1000, "1..=1000, or 0 for off")?;
        }
        if let Some(v) = self.context_window {
            range(
                "context_window",
                v,
                256,
                100_000_000,
                "256..=100000000 tokens, or 0 for the built-in table",
            )?;
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
        if patch.0.is_empty() {
            return Ok(());
        }
        let mut current = match serde_json::to_value(&*self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        for (key, value) in &patch.0 {
            current.insert(key.clone(), value.clone());
        }
        let mut next: LoopPolicy = serde_json::from_value(Value::Object(current)).map_err(|e| {
            PolicyError::InvalidValue {
                field: "policy".into(),
                message: e.to_string(),
            }
        })?;
        next.normalize_off_values();
        next.validate()?;
        *self = next;
        Ok(())
    }

    fn normalize_off_values(&mut self) {
        if self.chant_repeats == Some(0) {
            self.chant_repeats = None;
        }
        if self.max_stale_rounds == Some(0) {
            self.max_stale_rounds = None;
        }
        if self.max_calls_per_skill == Some(0) {
            self.max_calls_per_skill = None;
        }
        if self.substantive_answer_chars == Some(0) {
            self.substantive_answer_chars = None;
        }
        if self.withdraw_tools_after == Some(0) {
            self.withdraw_tools_after = None;
        }
        if self.max_turn_tokens == Some(0) {
            self.max_turn_tokens = None;
        }
        if self.deadline_ms == Some(0) {
            self.deadline_ms = None;
        }
        if self.context_window == Some(0) {
            self.context_window = None;
        }
        if self.reserve_output_tokens == Some(0) {
            self.reserve_output_tokens = None;
        }
    }
}

/// A partial policy: only the fields it names change. Each key is checked on its own
/// so an error always names the field that is wrong.
///
/// ```
/// use buddy_engine::{LoopPolicy, PolicyPatch};
/// use serde_json::json;
///
/// let mut policy = LoopPolicy::default();
/// policy.apply(&PolicyPatch::from_value(json!({"max_model_calls": 8}))?)?;
/// assert_eq!(policy.max_model_calls, 8);
///
/// let wrong = PolicyPatch::from_value(json!({"max_model_calls": "many"})).unwrap_err();
/// assert!(wrong.to_string().contains("max_model_calls"));
/// # Ok::<(), buddy_engine::PolicyError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct PolicyPatch(Map<String, Value>);

impl PolicyPatch {
    /// A patch from a JSON object, checked field by field.
    pub fn from_map(map: Map<String, Value>) -> Result<Self, PolicyError> {
        let defaults = match serde_json::to_value(LoopPolicy::default()) {
            Ok(Value::Object(defaults)) => defaults,
            _ => Map::new(),
        };
        for (key, value) in &map {
            if !defaults.contains_key(key) {
                return Err(PolicyError::UnknownField {
                    field: key.clone(),
                    known: defaults.keys().cloned().collect::<Vec<_>>().join(", "),
                });
            }
            // A default policy with only this field changed: type and range errors name it.
            let mut probe = defaults.clone();
            probe.insert(key.clone(), value.clone());
            let mut policy: LoopPolicy =
                serde_json::from_value(Value::Object(probe)).map_err(|e| {
                    PolicyError::InvalidValue {
                        field: key.clone(),
                        message: strip_serde_position(&e.to_string()),
                    }
                })?;
            policy.normalize_off_values();
            policy.validate()?;
        }
        Ok(PolicyPatch(map))
    }

    /// A patch from any JSON value, which must be an object.
    pub fn from_value(value: Value) -> Result<Self, PolicyError> {
        match value {
            Value::Object(map) => Self::from_map(map),
            Value::Null => Ok(PolicyPatch::default()),
            other => Err(PolicyError::InvalidValue {
                field: "policy".into(),
                message: format!("expected an object of policy fields, got {other}"),
            }),
        }
    }

    /// Sets one field from JSON, checked.
    pub fn set(&mut self, field: &str, value: Value) -> Result<(), PolicyError> {
        let mut map = Map::new();
        map.insert(field.to_owned(), value);
        let checked = Self::from_map(map)?;
        self.0.extend(checked.0);
        Ok(())
    }

    /// The patch given by `BUDDY_<FIELD>` variables (e.g. `BUDDY_MAX_MODEL_CALLS=10`).
    ///
    /// Takes the variables as pairs so callers (and tests) choose the source.
    pub fn from_env<I, K, V>(vars: I) -> Result<Self, PolicyError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let known = LoopPolicy::field_names();
        let mut patch = PolicyPatch::default();
        for (key, value) in vars {
            let Some(rest) = key.as_ref().strip_prefix("BUDDY_") else {
                continue;
            };
            let field = rest.to_ascii_lowercase();
            if !known.contains(&field) {
                continue;
            }
            let raw = value.as_ref().trim();
            let parsed = serde_json::from_str::<Value>(raw)
                .unwrap_or_else(|_| Value::String(raw.to_owned()));
            patch.set(&field, parsed).map_err(|e| PolicyError::Env {
                var: key.as_ref().to_owned(),
                source: Box::new(e),
            })?;
        }
        Ok(patch)
    }

    /// True when the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Layers `other` on top of this patch.
    pub fn merge(&mut self, other: &PolicyPatch) {
        for (k, v) in &other.0 {
            self.0.insert(k.clone(), v.clone());
        }
    }
}

impl<'de> Deserialize<'de> for PolicyPatch {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (patch, _) = deserializer.deserialize_map(PatchVisitor {
            nested_models: false,
        })?;
        Ok(patch)
    }
}

/// Reads a patch field by field, checking each value as it is read, so a format that
/// knows positions (TOML) puts an error on the line of the value that is wrong rather
/// than on the table's header.
struct PatchVisitor {
    /// Also accept a `model` table of patches (the `[policy]` section itself).
    nested_models: bool,
}

/// One checked field of a patch.
struct FieldSeed<'k>(&'k str);

impl<'de> serde::de::DeserializeSeed<'de> for FieldSeed<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let mut map = Map::new();
        map.insert(self.0.to_owned(), value.clone());
        PolicyPatch::from_map(map).map_err(serde::de::Error::custom)?;
        Ok(value)
    }
}

impl<'de> serde::de::Visitor<'de> for PatchVisitor {
    type Value = (PolicyPatch, BTreeMap<String, PolicyPatch>);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a table of policy fields")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut access: A,
    ) -> Result<Self::Value, A::Error> {
        let mut patch = Map::new();
        let mut models = BTreeMap::new();
        while let Some(key) = access.next_key::<String>()? {
            if self.nested_models && key == "model" {
                models = access.next_value::<BTreeMap<String, PolicyPatch>>()?;
            } else {
                let value = access.next_value_seed(FieldSeed(&key))?;
                patch.insert(key, value);
            }
        }
        Ok((PolicyPatch(patch), models))
    }
}

/// The `[policy]` section of `buddy.toml`: a base patch plus patches per model-name
/// pattern (`[policy.model."gpt-4o*"]`), since models differ in how they loop.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PolicyConfig {
    pub model: BTreeMap<String, PolicyPatch>,
    #[serde(flatten)]
    pub base: PolicyPatch,
}

impl<'de> Deserialize<'de> for PolicyConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (base, model) = deserializer.deserialize_map(PatchVisitor {
            nested_models: true,
        })?;
        Ok(PolicyConfig { model, base })
    }
}

impl PolicyConfig {
    /// The policy for `model`: defaults, then the base patch, then every matching model
    /// pattern from least to most specific, then `overrides` in order.
    pub fn resolve(
        &self,
        model: &str,
        overrides: &[&PolicyPatch],
    ) -> Result<LoopPolicy, PolicyError> {
        let mut policy = LoopPolicy::default();
        policy.apply(&self.base)?;
        let mut matching: Vec<(&String, &PolicyPatch)> = self
            .model
            .iter()
            .filter(|(pattern, _)| glob_match(pattern, model))
            .collect();
        matching.sort_by_key(|(pattern, _)| specificity(pattern));
        for (_, patch) in matching {
            policy.apply(patch)?;
        }
        for patch in overrides {
            policy.apply(patch)?;
        }
        Ok(policy)
    }
}

/// Longer literal parts are more specific; an exact name beats any pattern.
fn specificity(pattern: &str) -> (usize, usize) {
    let literal = pattern.chars().filter(|c| *c != '*' && *c != '?').count();
    let exact = usize::from(!pattern.contains(['*', '?']));
    (exact, literal)
}

fn strip_serde_position(message: &str) -> String {
    match message.find(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_match_the_design_table() {
        let p = LoopPolicy::default();
        assert_eq!(p.max_model_calls, 25);
        assert_eq!(p.max_tool_calls, 25);
        assert_eq!(p.max_consecutive_failures, 3);
        assert_eq!(p.max_calls_per_skill, None);
        assert_eq!(p.substantive_answer_chars, None);
        assert!(p.loop_detection && p.show_budget && !p.honor_stop && !p.finish_tool);
        p.validate().unwrap();
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
