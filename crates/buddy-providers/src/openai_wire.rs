//! The OpenAI Chat Completions request as clients send it, and its translation into
//! buddy's messages. Shared by the OpenAI-compatible endpoint and `buddy mock-server`.

use buddy_core::{Attachment, Message, ResponseFormat, Sampling, ToolCall, ToolSpec};
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
}

impl ChatCompletionRequest {
    /// The sampling and output settings the request asks for, or what is wrong with them.
    pub fn sampling(&self) -> Result<Sampling, String> {
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

/// A response format in the flat form (`{"type": "json_schema", "name", "schema", …}`,
/// the Responses API's `text.format`), or what is wrong with it.
pub fn response_format(format: Value) -> Result<ResponseFormat, String> {
    serde_json::from_value(format).map_err(|e| {
        format!("{e}; use {{\"type\": \"text\"}}, {{\"type\": \"json_object\"}} or a json_schema with `name` and `schema`")
    })
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
pub fn text_of(content: &Value) -> Option<String> {
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

/// A user message's text and attachments, from a string or content parts of either
/// OpenAI API: `text` / `input_text`, `image_url` / `input_image`, `file` / `input_file`
/// (as `file_data`). A part buddy cannot pass on (audio, a `file_id` of a Files API
/// buddy does not have) is refused by name, never dropped.
pub fn user_content(content: &Value) -> Result<(String, Vec<Attachment>), String> {
    let parts = match content {
        Value::String(text) => return Ok((text.clone(), Vec::new())),
        Value::Null => return Ok((String::new(), Vec::new())),
        Value::Array(parts) => parts,
        other => {
            return Err(format!(
                "`content` must be text or a list of parts, got {other}"
            ));
        }
    };
    let mut texts = Vec::new();
    let mut attachments = Vec::new();
    for (n, part) in parts.iter().enumerate() {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("text");
        let string = |v: &Value| v.as_str().map(str::to_owned);
        match kind {
            "text" | "input_text" => {
                texts.push(part.get("text").and_then(string).unwrap_or_default())
            }
            "image_url" | "input_image" => {
                if part.get("file_id").is_some_and(|f| !f.is_null()) {
                    return Err(format!(
                        "part {n}: images by `file_id` need a Files API buddy does not have; send `image_url` (an https: or data: URL)"
                    ));
                }
                // Chat Completions nests it ({"image_url": {"url", "detail"}}); Responses does not.
                let nested = part.get("image_url").filter(|v| v.is_object());
                let url = nested
                    .and_then(|v| v.get("url"))
                    .or_else(|| part.get("image_url"))
                    .and_then(string)
                    .ok_or_else(|| format!("part {n}: an image needs its URL (`image_url`)"))?;
                let detail = nested
                    .and_then(|v| v.get("detail"))
                    .or_else(|| part.get("detail"))
                    .and_then(string);
                attachments.push(Attachment::Image { url, detail });
            }
            "file" | "input_file" => {
                let file = part.get("file").filter(|v| v.is_object()).unwrap_or(part);
                if file.get("file_id").is_some_and(|f| !f.is_null()) {
                    return Err(format!(
                        "part {n}: files by `file_id` need a Files API buddy does not have; send `file_data` (a data: URL)"
                    ));
                }
                let data = file.get("file_data").and_then(string).ok_or_else(|| {
                    format!("part {n}: a file needs `file_data` (data:<media type>;base64,…); file URLs are not fetched")
                })?;
                let filename = file.get("filename").and_then(string);
                attachments.push(Attachment::File { filename, data });
            }
            other => {
                return Err(format!(
                    "part {n}: content of type `{other}` is not supported; buddy takes text, images and files"
                ));
            }
        }
    }
    Ok((texts.join("\n"), attachments))
}

/// buddy's messages for a request's `messages`, or what is wrong with one of them.
pub fn to_messages(wire: Vec<WireMessage>) -> Result<Vec<Message>, String> {
    wire.into_iter()
        .enumerate()
        .map(|(i, m)| {
            Ok(match m.role.as_str() {
                "system" | "developer" => Message::system(m.content.as_ref().and_then(text_of).unwrap_or_default()),
                "user" => {
                    let (text, attachments) = match &m.content {
                        Some(content) => user_content(content)
                            .map_err(|e| format!("messages[{i}]: {e}"))?,
                        None => (String::new(), Vec::new()),
                    };
                    // buddy's own notes (guard and budget notes) travel as user text
                    // marked `[buddy]`; read them back as notes, not as the user speaking.
                    if text.starts_with(Message::NOTE_MARK) && attachments.is_empty() {
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
