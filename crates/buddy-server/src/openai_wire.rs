//! The OpenAI Chat Completions request as clients send it, and its translation into
//! buddy's messages. Shared by the OpenAI-compatible endpoint and `buddy mock-server`.

use buddy_core::{Message, ToolCall, ToolSpec};
use serde::Deserialize;
use serde_json::{Value, json};

/// A Chat Completions request (fields buddy does not use are ignored).
#[derive(Deserialize)]
pub struct ChatCompletionRequest {
    pub model: Option<String>,
    pub messages: Vec<WireMessage>,
    #[serde(default)]
    pub tools: Vec<WireTool>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub stream: bool,
    /// `{"include_usage": true}` asks for the usage chunk at the end of a stream.
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// buddy's own extension: policy overrides for this request.
    #[serde(default)]
    pub buddy_policy: Option<Value>,
}

/// `stream_options` of a streamed request.
#[derive(Deserialize, Default)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// One message of a request.
#[derive(Deserialize)]
pub struct WireMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<Value>,
    #[serde(default)]
    pub tool_calls: Vec<WireToolCall>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// A tool call in an assistant message.
#[derive(Deserialize)]
pub struct WireToolCall {
    pub id: String,
    pub function: WireFunction,
}

/// The function of a tool call.
#[derive(Deserialize)]
pub struct WireFunction {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

/// A tool the client declares.
#[derive(Deserialize)]
pub struct WireTool {
    pub function: WireToolDef,
}

/// A declared tool's definition.
#[derive(Deserialize)]
pub struct WireToolDef {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "empty_object")]
    pub parameters: Value,
}

fn empty_object() -> Value {
    json!({"type": "object", "properties": {}})
}

impl From<WireTool> for ToolSpec {
    fn from(tool: WireTool) -> Self {
        ToolSpec {
            name: tool.function.name,
            description: tool.function.description,
            parameters: tool.function.parameters,
        }
    }
}

/// Text of a message's `content`: a string, or the text parts of an array.
pub(crate) fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// buddy's messages for a request's `messages`, or what is wrong with one of them.
pub fn to_messages(wire: Vec<WireMessage>) -> Result<Vec<Message>, String> {
    wire.into_iter()
        .enumerate()
        .map(|(i, m)| {
            Ok(match m.role.as_str() {
                "system" | "developer" => Message::system(m.content.as_ref().and_then(text_of).unwrap_or_default()),
                "user" => {
                    let text = m.content.as_ref().and_then(text_of).unwrap_or_default();
                    // buddy's own notes (guard and budget notes) travel as user text
                    // marked `[buddy]`; read them back as notes, not as the user speaking.
                    if text.starts_with(Message::NOTE_MARK) {
                        Message::note(text)
                    } else {
                        Message::user(text)
                    }
                }
                "assistant" => Message::Assistant {
                    content: m.content.as_ref().and_then(text_of).filter(|t| !t.is_empty()),
                    tool_calls: m
                        .tool_calls
                        .into_iter()
                        .map(|c| ToolCall::new(c.id, c.function.name, c.function.arguments))
                        .collect(),
                },
                "tool" => Message::tool_result(
                    m.tool_call_id
                        .ok_or_else(|| format!("messages[{i}]: a tool message needs `tool_call_id`"))?,
                    m.content.as_ref().and_then(text_of).unwrap_or_default(),
                    false,
                ),
                other => {
                    return Err(format!(
                        "messages[{i}]: unknown role `{other}`; use system, developer, user, assistant or tool"
                    ));
                }
            })
        })
        .collect()
}
