//! Partial policies and their layering: `PolicyPatch` (a few fields, each checked on its
//! own) and `PolicyConfig` (`[policy]` of buddy.toml with per-model patterns).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::fields::PatchFields;
use super::{LoopPolicy, PolicyError};
use crate::glob::glob_match;

/// A partial policy: only the fields it names change, each typed as `LoopPolicy` types
/// it (the fields come from the one policy table, `fields.rs`). Each key is checked on
/// its own so an error always names the field that is wrong.
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
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyPatch(PatchFields);

impl PolicyPatch {
    /// A patch from a JSON object, checked field by field.
    pub fn from_map(map: Map<String, Value>) -> Result<Self, PolicyError> {
        let mut fields = PatchFields::default();
        for (key, value) in map {
            fields.set(&key, value)?;
        }
        Ok(PolicyPatch(fields))
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
        self.0.set(field, value)
    }

    /// Sets `max_tool_calls`, checked: a request's own tool-call limit (the Responses
    /// API's `max_tool_calls`).
    pub fn set_max_tool_calls(&mut self, value: u64) -> Result<(), PolicyError> {
        self.0.set("max_tool_calls", Value::from(value))
    }

    /// Sets `max_turn_cost_usd`, checked: the money a turn may spend (a key's room).
    pub fn set_max_turn_cost_usd(&mut self, value: buddy_core::Usd) -> Result<(), PolicyError> {
        let json = serde_json::to_value(value).map_err(|e| PolicyError::InvalidValue {
            field: "max_turn_cost_usd".into(),
            message: e.to_string(),
        })?;
        self.0.set("max_turn_cost_usd", json)
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
        self.0.given().is_empty()
    }

    /// The fields the patch sets, in alphabetical order, with the JSON they were given as.
    pub fn fields(&self) -> impl Iterator<Item = (&'static str, &Value)> {
        self.0.given().into_iter()
    }

    /// Layers `other` on top of this patch.
    pub fn merge(&mut self, other: &PolicyPatch) {
        self.0.merge(&other.0);
    }

    /// Sets every field this patch sets in `policy`, unchecked (`LoopPolicy::apply` checks).
    pub(super) fn set_in(&self, policy: &mut LoopPolicy) {
        self.0.apply_to(policy);
    }
}

/// Written as the JSON object it was read from: its fields, by name, as they were given.
impl Serialize for PolicyPatch {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.given())
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
    type Value = PatchFields;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<PatchFields, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let mut field = PatchFields::default();
        field.set(self.0, value).map_err(serde::de::Error::custom)?;
        Ok(field)
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
        let mut patch = PatchFields::default();
        let mut models = BTreeMap::new();
        while let Some(key) = access.next_key::<String>()? {
            if self.nested_models && key == "model" {
                models = access.next_value::<BTreeMap<String, PolicyPatch>>()?;
            } else {
                patch.merge(&access.next_value_seed(FieldSeed(&key))?);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Check, POLICY_FIELDS};
    use serde_json::json;

    /// How the string-keyed patch this one replaced checked a field: kept as the oracle
    /// that the typed patch accepts and refuses the same values with the same words.
    fn map_check(key: &str, value: &Value) -> Result<(), PolicyError> {
        let Ok(Value::Object(mut probe)) = serde_json::to_value(LoopPolicy::default()) else {
            unreachable!("a policy is an object");
        };
        if !POLICY_FIELDS.iter().any(|f| f.name == key) {
            return Err(PolicyError::UnknownField {
                field: key.to_owned(),
                known: LoopPolicy::field_names().join(", "),
            });
        }
        probe.insert(key.to_owned(), value.clone());
        let mut policy: LoopPolicy = serde_json::from_value(Value::Object(probe)).map_err(|e| {
            PolicyError::InvalidValue {
                field: key.to_owned(),
                message: e.to_string(),
            }
        })?;
        policy.normalize_off_values();
        policy.validate()
    }

    /// How the string-keyed patch applied: through the policy's JSON.
    fn map_apply(policy: &LoopPolicy, patch: &Map<String, Value>) -> LoopPolicy {
        let Ok(Value::Object(mut current)) = serde_json::to_value(policy) else {
            unreachable!("a policy is an object");
        };
        current.extend(patch.clone());
        let mut next: LoopPolicy = serde_json::from_value(Value::Object(current)).unwrap();
        next.normalize_off_values();
        next
    }

    fn samples(field: &crate::policy::Field) -> Vec<Value> {
        let mut values = vec![
            json!(null),
            json!(0),
            json!(1),
            json!(2),
            json!(-1),
            json!(0.5),
            json!(1.0),
            json!(1e300),
            json!(u64::MAX),
            json!("x"),
            json!("10"),
            json!(true),
            json!([]),
            json!({}),
            json!("error"),
            json!("finalize"),
            json!(100),
            json!(5_000),
        ];
        if let Check::Range { lo, hi, .. } = field.check {
            for n in [lo.saturating_sub(1), lo, hi, hi.saturating_add(1)] {
                values.push((field.json)(n));
            }
        }
        values
    }

    #[test]
    fn every_field_is_checked_as_the_map_patch_checked_it() {
        for field in POLICY_FIELDS {
            for value in samples(field) {
                let typed = PolicyPatch::from_value(json!({ field.name: value.clone() }));
                assert_eq!(
                    typed.as_ref().map(|_| ()),
                    map_check(field.name, &value).as_ref().copied(),
                    "{} = {value}",
                    field.name
                );
                if let Ok(patch) = typed {
                    for start in [LoopPolicy::default(), strict()] {
                        let mut applied = start.clone();
                        let map = Map::from_iter([(field.name.to_owned(), value.clone())]);
                        match applied.apply(&patch) {
                            Ok(()) => assert_eq!(applied, map_apply(&start, &map)),
                            Err(e) => assert_eq!(Err(e), map_apply(&start, &map).validate()),
                        }
                    }
                }
            }
        }
        assert_eq!(
            PolicyPatch::from_value(json!({"max_modle_calls": 3})),
            Err(map_check("max_modle_calls", &json!(3)).unwrap_err())
        );
    }

    /// A policy far from the defaults, to apply patches on.
    fn strict() -> LoopPolicy {
        LoopPolicy {
            max_model_calls: 5,
            max_calls_per_skill: Some(2),
            context_window: Some(8_000),
            reserve_output_tokens: Some(3_000),
            max_turn_cost_usd: buddy_core::Usd::from_dollars(0.25),
            on_limit: super::super::OnLimit::Error,
            ..LoopPolicy::default()
        }
    }

    #[test]
    fn a_patch_is_written_back_as_it_was_given() {
        let given = json!({
            "max_turn_cost_usd": 1,
            "max_calls_per_skill": 0,
            "substantive_answer_chars": null,
            "on_limit": "error",
            "max_model_calls": 8,
            "loop_detection": false,
            "deadline_ms": 1500,
        });
        let patch = PolicyPatch::from_value(given.clone()).unwrap();
        let written = serde_json::to_string(&patch).unwrap();
        assert_eq!(written, serde_json::to_string(&given).unwrap());
        let read: PolicyPatch = serde_json::from_str(&written).unwrap();
        assert_eq!(read, patch);
        let config: PolicyConfig =
            serde_json::from_value(json!({"max_tool_calls": 9, "model": {"a*": given}})).unwrap();
        assert_eq!(
            serde_json::to_string(&config).unwrap(),
            format!(r#"{{"model":{{"a*":{written}}},"max_tool_calls":9}}"#)
        );
    }

    #[test]
    fn later_fields_and_patches_win() {
        let mut patch = PolicyPatch::from_value(json!({"max_model_calls": 8})).unwrap();
        patch.set("max_tool_calls", json!(20)).unwrap();
        patch.merge(
            &PolicyPatch::from_value(json!({"max_model_calls": 9, "honor_stop": true})).unwrap(),
        );
        let fields: Vec<(&str, &Value)> = patch.fields().collect();
        assert_eq!(
            fields,
            [
                ("honor_stop", &json!(true)),
                ("max_model_calls", &json!(9)),
                ("max_tool_calls", &json!(20))
            ]
        );
        assert!(!patch.is_empty() && PolicyPatch::default().is_empty());
        let err =
            serde_json::from_value::<PolicyPatch>(json!({"max_tool_calls": "many"})).unwrap_err();
        assert!(
            err.to_string().starts_with("policy field `max_tool_calls`"),
            "{err}"
        );
    }
}
