//! Partial policies and their layering: `PolicyPatch` (a few fields, each checked on its
//! own) and `PolicyConfig` (`[policy]` of buddy.toml with per-model patterns).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{LoopPolicy, POLICY_FIELDS, PolicyError};
use crate::glob::glob_match;

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
            if !POLICY_FIELDS.iter().any(|f| f.name == key) {
                return Err(PolicyError::UnknownField {
                    field: key.clone(),
                    known: LoopPolicy::field_names().join(", "),
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

    /// The fields the patch sets, with their JSON values.
    pub fn fields(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter()
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
