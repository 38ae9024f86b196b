//! The Chat Completions request as clients send it, and its translation into buddy's
//! messages.

use buddy_core::{Message, ResponseFormat, Sampling, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::content::{response_format, text_of, user_content};
use super::tools::{WireTool, WireToolCall};

/// A Chat Completions request (fields buddy does not use are ignored).
#[derive(Deserialize)]
pub struct ChatCompletionRequest {
    pub model: Option<String>,
    pub messages: Vec<WireMessage>,
    #[serde(default)]
    pub tools: Vec<WireTool<'static>>,
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
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    /// The older name of `max_completion_tokens`.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub max_completion_tokens: Option<u32>,
    #[serde(default)]
    pub seed: Option<i64>,
    /// A string or a list of strings.
    #[serde(default)]
    pub stop: Option<Value>,
    #[serde(default)]
    pub response_format: Option<Value>,
    /// How many choices to make; buddy makes one (a turn runs tools, and runs them once).
    #[serde(default)]
    pub n: Option<u32>,
    /// The client's key for the provider's prompt cache: passed on for every model call
    /// of the turn.
    #[serde(default)]
    pub prompt_cache_key: Option<String>,
}

impl ChatCompletionRequest {
    /// The sampling and output settings the request asks for, or what is wrong with them.
    pub fn sampling(&self) -> Result<Sampling, String> {
        if let Some(n) = self.n.filter(|n| *n != 1) {
            return Err(format!(
                "`n` = {n}: buddy answers with one choice (a turn runs its tools once); send {n} requests instead, or leave `n` out"
            ));
        }
        let stop = match &self.stop {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(one)) => vec![one.clone()],
            Some(Value::Array(many)) => many
                .iter()
                .map(|s| s.as_str().map(str::to_owned))
                .collect::<Option<Vec<String>>>()
                .ok_or("`stop` must be a string or a list of strings")?,
            Some(_) => return Err("`stop` must be a string or a list of strings".into()),
        };
        let response_format = match &self.response_format {
            None | Some(Value::Null) => None,
            Some(format) => Some(chat_response_format(format)?),
        };
        Ok(Sampling {
            temperature: self.temperature,
            top_p: self.top_p,
            max_output_tokens: self.max_completion_tokens.or(self.max_tokens),
            seed: self.seed,
            stop,
            response_format,
        })
    }
}

/// Chat Completions' `response_format` (`{"type": "json_schema", "json_schema": {…}}`).
fn chat_response_format(format: &Value) -> Result<ResponseFormat, String> {
    let mut flat = format.clone();
    if format["type"] == "json_schema" {
        let spec = format.get("json_schema").and_then(Value::as_object).ok_or(
            "`response_format` of type json_schema needs a `json_schema` object with `name` and `schema`",
        )?;
        if let Some(object) = flat.as_object_mut() {
            object.remove("json_schema");
            object.extend(spec.clone());
        }
    }
    response_format(flat).map_err(|e| format!("`response_format`: {e}"))
}

/// `stream_options` of a streamed request.
#[derive(Deserialize, Serialize, Default)]
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
    pub tool_calls: Vec<WireToolCall<'static>>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// buddy's messages for a request's `messages`, or what is wrong with one of them.
pub fn to_messages(wire: Vec<WireMessage>) -> Result<Vec<Message>, String> {
    wire.into_iter()
        .enumerate()
        .map(|(i, m)| {
            Ok(match m.role.as_str() {
                "system" | "developer" => {
                    let text = m.content.as_ref().and_then(text_of).unwrap_or_default();
                    // buddy's notes travel as marked system messages: read them back as notes.
                    if Message::is_note_text(&text) {
                        Message::note(text)
                    } else {
                        Message::system(text)
                    }
                }
                "user" => {
                    let (text, attachments) = match &m.content {
                        Some(content) => user_content(content)
                            .map_err(|e| format!("messages[{i}]: {e}"))?,
                        None => (String::new(), Vec::new()),
                    };
                    // buddy's own notes (guard and budget notes) travel as user text
                    // marked `[system note]` (earlier `[buddy]`); read them back as notes, not as the user speaking.
                    if Message::is_note_text(&text) && attachments.is_empty() {
                        Message::note(text)
                    } else {
                        Message::user_with(text, attachments)
                    }
                }
                "assistant" => Message::Assistant {
                    content: m.content.as_ref().and_then(text_of).filter(|t| !t.is_empty()),
                    tool_calls: m
                        .tool_calls
                        .into_iter()
                        .map(|c| {
                            ToolCall::new(
                                c.id.into_owned(),
                                c.function.name.into_owned(),
                                c.function.arguments.into_owned(),
                            )
                        })
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
