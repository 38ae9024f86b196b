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
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
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

/// Token usage, as Anthropic reports it (cache figures apart from `input_tokens`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
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
                    OutputBlock::Text { text: "ok".into() },
                    OutputBlock::ToolUse {
                        id: "toolu_1".into(),
                        name: "Bash".into(),
                        input: json!({"command": "ls"}),
                    },
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
                "content": [{"type": "text", "text": "ok"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 3, "output_tokens": 4,
                    "cache_creation_input_tokens": null, "cache_read_input_tokens": null}})
        );
    }

    #[test]
    fn errors_and_models_have_anthropics_shape() {
        let error = ErrorBody::new(error_type_for_status(529), "Overloaded");
        assert_eq!(
            serde_json::to_value(&error).unwrap(),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
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
