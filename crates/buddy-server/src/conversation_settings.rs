//! A conversation's own settings — a system prompt and a loop policy — kept with it and
//! applied to each of its turns, so a person (or the chat page) sets them once.

use buddy_engine::PolicyPatch;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::AppError;

/// Longest system prompt a conversation keeps, in characters.
pub(crate) const MAX_SYSTEM_CHARS: usize = 20_000;

/// Metadata as OpenAI's API takes it: an object of at most 16 string values, keys of at
/// most 64 characters, values of at most 512; what is wrong is named.
pub(crate) fn checked_metadata(value: Value) -> Result<serde_json::Map<String, Value>, String> {
    let Value::Object(pairs) = value else {
        return Err("`metadata` must be an object of strings".into());
    };
    if pairs.len() > 16 {
        return Err(format!(
            "`metadata` has {} keys; at most 16 are kept",
            pairs.len()
        ));
    }
    for (key, value) in &pairs {
        if key.chars().count() > 64 {
            return Err(format!(
                "`metadata` key `{key}` is longer than 64 characters"
            ));
        }
        match value.as_str() {
            Some(text) if text.chars().count() <= 512 => {}
            Some(_) => return Err(format!("`metadata.{key}` is longer than 512 characters")),
            None => return Err(format!("`metadata.{key}` must be a string")),
        }
    }
    Ok(pairs)
}

/// The settings as a client sends them and the store keeps them.
#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    metadata: Option<Value>,
}

/// What a conversation's turns run with beyond the operator's configuration: a system
/// prompt after the operator's own, and a policy that may only lower the operator's limits.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ConversationSettings {
    pub system: Option<String>,
    pub policy: PolicyPatch,
    /// OpenAI's conversation `metadata`: up to 16 string pairs, kept and shown, never
    /// read by a turn.
    pub metadata: Option<serde_json::Map<String, Value>>,
}

impl ConversationSettings {
    /// Settings a client sent (`{"system": "…", "policy": {…}}`, both optional), checked:
    /// every way they can be wrong is a 400 that names the field.
    pub(crate) fn parse(value: Value) -> Result<Self, AppError> {
        let wire: Wire = serde_json::from_value(value).map_err(|e| {
            AppError::BadRequest(format!(
                "`settings` must be an object with `system` (a string) and `policy` (an object \
                 of policy fields), both optional: {e}"
            ))
        })?;
        Self::from_wire(wire).map_err(AppError::BadRequest)
    }

    /// The settings a conversation has kept (`{}` when none). Ones this server can no
    /// longer read (a policy field a newer configuration refuses) are a 400 saying how
    /// to set them again.
    pub(crate) fn stored(value: &Value) -> Result<Self, AppError> {
        serde_json::from_value::<Wire>(value.clone())
            .map_err(|e| e.to_string())
            .and_then(Self::from_wire)
            .map_err(|e| {
                AppError::BadRequest(format!(
                    "this conversation's saved settings no longer apply ({e}); set them again \
                     with PATCH /v1/conversations/{{id}} and `settings`"
                ))
            })
    }

    fn from_wire(wire: Wire) -> Result<Self, String> {
        let system = wire
            .system
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty());
        if let Some(system) = &system {
            let chars = system.chars().count();
            if chars > MAX_SYSTEM_CHARS {
                return Err(format!(
                    "`settings.system` has {chars} characters; at most {MAX_SYSTEM_CHARS} are kept"
                ));
            }
        }
        let policy = match wire.policy {
            Some(value) => {
                PolicyPatch::from_value(value).map_err(|e| format!("`settings.policy`: {e}"))?
            }
            None => PolicyPatch::default(),
        };
        let metadata = wire.metadata.map(checked_metadata).transpose()?;
        Ok(ConversationSettings {
            system,
            policy,
            metadata,
        })
    }

    /// The JSON the store keeps and `GET /v1/conversations/{id}` shows.
    pub(crate) fn to_value(&self) -> Value {
        let policy = (!self.policy.is_empty())
            .then(|| serde_json::to_value(&self.policy).unwrap_or(Value::Null));
        serde_json::to_value(Wire {
            system: self.system.clone(),
            policy,
            metadata: self.metadata.clone().map(Value::Object),
        })
        .unwrap_or_else(|_| Value::Object(serde_json::Map::new()))
    }

    /// This conversation's policy with a request's own on top (the request's fields win).
    pub(crate) fn policy_with(&self, request: &PolicyPatch) -> PolicyPatch {
        let mut policy = self.policy.clone();
        policy.merge(request);
        policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_round_trip_through_what_the_store_keeps() {
        let settings = ConversationSettings::parse(json!({
            "system": "  Answer in French.  ",
            "policy": {"max_tool_calls": 4}
        }))
        .expect("valid");
        assert_eq!(settings.system.as_deref(), Some("Answer in French."));
        let kept = settings.to_value();
        assert_eq!(
            kept,
            json!({"system": "Answer in French.", "policy": {"max_tool_calls": 4}})
        );
        assert_eq!(
            ConversationSettings::stored(&kept).expect("stored"),
            settings
        );
        assert_eq!(
            ConversationSettings::stored(&json!({})).expect("none"),
            ConversationSettings::default()
        );
        assert_eq!(ConversationSettings::default().to_value(), json!({}));
    }

    #[test]
    fn bad_settings_are_refused_naming_the_field() {
        let message = |value: Value| match ConversationSettings::parse(value) {
            Err(AppError::BadRequest(m)) => m,
            other => panic!("expected a 400, got {other:?}"),
        };
        assert!(message(json!({"policy": {"max_tool_calls": "many"}})).contains("max_tool_calls"));
        assert!(message(json!({"policy": {"nope": 1}})).contains("nope"));
        assert!(message(json!({"sytem": "typo"})).contains("sytem"));
        assert!(message(json!({"system": "x".repeat(MAX_SYSTEM_CHARS + 1)})).contains("at most"));
        assert!(message(json!("French")).contains("must be an object"));
    }

    #[test]
    fn a_request_policy_wins_over_the_conversation_one() {
        let settings = ConversationSettings::parse(
            json!({"policy": {"max_tool_calls": 4, "max_model_calls": 6}}),
        )
        .expect("valid");
        let request =
            PolicyPatch::from_value(json!({"max_tool_calls": 2})).expect("valid request policy");
        let merged = serde_json::to_value(settings.policy_with(&request)).expect("json");
        assert_eq!(merged, json!({"max_tool_calls": 2, "max_model_calls": 6}));
    }
}
