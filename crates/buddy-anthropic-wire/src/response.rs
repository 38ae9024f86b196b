//! What the server answers: a whole message, a token count, the model list and errors.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A whole reply (`"type": "message"`), as `POST /v1/messages` answers without `stream`
/// and as `message_start` carries it (empty) in a stream.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct MessageResponse {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub role: String,
    pub model: String,
    pub content: Vec<OutputBlock>,
    /// `end_turn`, `max_tokens`, `stop_sequence`, `tool_use`, `pause_turn`, `refusal`;
    /// null in `message_start`.
    pub stop_reason: Option<String>,
    pub stop_sequence: Option<String>,
    /// Why the output stopped, in detail (a refusal's); null otherwise.
    #[serde(default)]
    pub stop_details: Option<Value>,
    /// The code-execution container the request used; null without one.
    #[serde(default)]
    pub container: Option<Value>,
    pub usage: Usage,
}

impl MessageResponse {
    /// An assistant message `id` of `model` with `content`.
    pub fn new(id: String, model: String, content: Vec<OutputBlock>, usage: Usage) -> Self {
        MessageResponse {
            id,
            kind: "message".into(),
            role: "assistant".into(),
            model,
            content,
            stop_reason: None,
            stop_sequence: None,
            stop_details: None,
            container: None,
            usage,
        }
    }
}

/// A block of a reply.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputBlock {
    Text {
        text: String,
        /// Where the text cites from; null for none.
        #[serde(default)]
        citations: Option<Value>,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
        /// Who made the call: `{"type": "direct"}`, the model itself.
        #[serde(default = "direct_caller")]
        caller: Value,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    /// Any other block an upstream sends (`server_tool_use`, `web_search_tool_result`, …).
    #[serde(untagged)]
    Other(Value),
}

/// The caller of a tool call the model made itself.
pub fn direct_caller() -> Value {
    serde_json::json!({"type": "direct"})
}

impl OutputBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        OutputBlock::Text {
            text: text.into(),
            citations: None,
        }
    }

    /// A `tool_use` block the model made.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        OutputBlock::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
            caller: direct_caller(),
        }
    }
}

/// Token usage, as Anthropic reports it (cache figures apart from `input_tokens`); the
/// breakdowns buddy does not have are null.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_creation: Option<Value>,
    #[serde(default)]
    pub inference_geo: Option<String>,
    #[serde(default)]
    pub output_tokens_details: Option<Value>,
    #[serde(default)]
    pub server_tool_use: Option<Value>,
    #[serde(default)]
    pub service_tier: Option<String>,
}

/// `POST /v1/messages/count_tokens`'s answer.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct TokenCount {
    pub input_tokens: u64,
}

/// One model of `GET /v1/models` (asked with `anthropic-version`).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ModelInfo {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub display_name: String,
    /// RFC 3339.
    pub created_at: String,
    /// What the model supports, and its limits: null where buddy does not know them.
    #[serde(default)]
    pub capabilities: Option<Value>,
    #[serde(default)]
    pub max_input_tokens: Option<u64>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
}

/// The model list, one page of it (buddy sends one page).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ModelList {
    pub data: Vec<ModelInfo>,
    pub has_more: bool,
    pub first_id: Option<String>,
    pub last_id: Option<String>,
}

impl ModelList {
    /// The list of models named `ids`, all on one page.
    pub fn of(ids: &[String]) -> Self {
        let data: Vec<ModelInfo> = ids
            .iter()
            .map(|id| ModelInfo {
                kind: "model".into(),
                id: id.clone(),
                display_name: id.clone(),
                created_at: "1970-01-01T00:00:00Z".into(),
                capabilities: None,
                max_input_tokens: None,
                max_tokens: None,
            })
            .collect();
        ModelList {
            first_id: data.first().map(|m| m.id.clone()),
            last_id: data.last().map(|m| m.id.clone()),
            data,
            has_more: false,
        }
    }
}

/// An error (`{"type": "error", "error": {"type", "message"}}`), as a body and as a
/// stream's `error` event.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ErrorBody {
    #[serde(rename = "type")]
    pub kind: String,
    pub error: ErrorDetail,
    /// The request's id, when the server gives one (buddy: null).
    #[serde(default)]
    pub request_id: Option<String>,
}

/// What went wrong: Anthropic's error type and a message.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ErrorDetail {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

impl ErrorBody {
    /// An error of `kind` (`invalid_request_error`, `overloaded_error`, …).
    pub fn new(kind: &str, message: impl Into<String>) -> Self {
        ErrorBody {
            kind: "error".into(),
            error: ErrorDetail {
                kind: kind.into(),
                message: message.into(),
            },
            request_id: None,
        }
    }
}

/// Anthropic's error type for an HTTP status (its documented table; 529 is "overloaded").
pub fn error_type_for_status(status: u16) -> &'static str {
    match status {
        400 | 405 | 408 | 409 | 422 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_message_is_written_as_anthropic_writes_it() {
        let message = MessageResponse {
            stop_reason: Some("tool_use".into()),
            ..MessageResponse::new(
                "msg_1".into(),
                "claude".into(),
                vec![
                    OutputBlock::text("ok"),
                    OutputBlock::tool_use("toolu_1", "Bash", json!({"command": "ls"})),
                ],
                Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                    ..Usage::default()
                },
            )
        };
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                "content": [{"type": "text", "text": "ok", "citations": null},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"},
                     "caller": {"type": "direct"}}],
                "stop_reason": "tool_use", "stop_sequence": null, "stop_details": null, "container": null,
                "usage": {"input_tokens": 3, "output_tokens": 4,
                    "cache_creation_input_tokens": null, "cache_read_input_tokens": null,
                    "cache_creation": null, "inference_geo": null, "output_tokens_details": null,
                    "server_tool_use": null, "service_tier": null}})
        );
    }

    #[test]
    fn errors_and_models_have_anthropics_shape() {
        let error = ErrorBody::new(error_type_for_status(529), "Overloaded");
        assert_eq!(
            serde_json::to_value(&error).unwrap(),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"},
                   "request_id": null})
        );
        assert_eq!(error_type_for_status(401), "authentication_error");
        assert_eq!(error_type_for_status(502), "api_error");
        let list = ModelList::of(&["a".into(), "b".into()]);
        let json = serde_json::to_value(&list).unwrap();
        assert_eq!(json["data"][1]["type"], "model");
        assert_eq!(
            (&json["first_id"], &json["last_id"]),
            (&json!("a"), &json!("b"))
        );
        assert_eq!(ModelList::of(&[]).first_id, None);
    }
}
