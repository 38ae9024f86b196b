//! The Chat Completions request body, borrowing from the history (no copies).

use buddy_core::{Attachment, CompletionRequest, Message, ResponseFormat, ToolChoice};
use serde::Serialize;
use serde_json::{Value, json};

use super::OpenAiCompat;

#[derive(Serialize)]
pub(crate) struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<WireTool<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
}

/// A user message's content: its text, or (with images or files) content parts.
fn user_content(text: &str, attachments: &[Attachment]) -> Value {
    if attachments.is_empty() {
        return json!(text);
    }
    let mut parts = Vec::with_capacity(attachments.len() + 1);
    if !text.is_empty() {
        parts.push(json!({"type": "text", "text": text}));
    }
    for attachment in attachments {
        parts.push(match attachment {
            Attachment::Image { url, detail } => {
                let mut image = json!({"url": url});
                if let Some(detail) = detail {
                    image["detail"] = json!(detail);
                }
                json!({"type": "image_url", "image_url": image})
            }
            Attachment::File { filename, data } => {
                let mut file = json!({"file_data": data});
                if let Some(filename) = filename {
                    file["filename"] = json!(filename);
                }
                json!({"type": "file", "file": file})
            }
        });
    }
    Value::Array(parts)
}

/// OpenAI's `response_format` for a requested shape.
fn response_format(format: &ResponseFormat) -> Value {
    match format {
        ResponseFormat::Text => json!({"type": "text"}),
        ResponseFormat::JsonObject => json!({"type": "json_object"}),
        ResponseFormat::JsonSchema {
            name,
            schema,
            description,
            strict,
        } => {
            let mut spec = json!({"name": name, "schema": schema});
            if let Some(description) = description {
                spec["description"] = json!(description);
            }
            if let Some(strict) = strict {
                spec["strict"] = json!(strict);
            }
            json!({"type": "json_schema", "json_schema": spec})
        }
    }
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        /// Text, or parts when images or files come with it.
        content: Value,
    },
    Assistant {
        /// `null` when the message only calls tools (or `""` for servers that need it).
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolDef<'a>,
}

#[derive(Serialize)]
struct WireToolDef<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

/// Builds the body. Tools defined but not callable (`tool_choice: none`, buddy's
/// Finalize) are left out entirely: the strongest "no tools" every compatible server understands.
pub(crate) fn chat_request<'a>(
    request: &CompletionRequest<'a>,
    stream: bool,
    compat: &OpenAiCompat,
    max_tokens: Option<u32>,
) -> ChatRequest<'a> {
    let messages = request
        .messages
        .iter()
        .map(|m| match m {
            Message::System { content } => WireMessage::System { content },
            // buddy's notes go as system messages, which no model takes for the user
            // speaking (OpenAI's API takes them anywhere and hands them to reasoning models
            // as developer messages); a server whose template refuses a system message
            // after the first gets them as user text (`compat.notes_as_user`).
            Message::Note { content } if !compat.notes_as_user => WireMessage::System { content },
            Message::User {
                content,
                attachments,
            } => WireMessage::User {
                content: user_content(content, attachments),
            },
            Message::Note { content } => WireMessage::User {
                content: json!(content),
            },
            Message::Assistant {
                content,
                tool_calls,
            } => WireMessage::Assistant {
                content: match content.as_deref() {
                    Some(text) if !text.is_empty() => Some(text),
                    _ if compat.assistant_content_empty_string => Some(""),
                    _ => None,
                },
                tool_calls: tool_calls
                    .iter()
                    .map(|c| WireToolCall {
                        id: &c.id,
                        kind: "function",
                        function: WireFunction {
                            name: &c.name,
                            arguments: &c.arguments,
                        },
                    })
                    .collect(),
            },
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => WireMessage::Tool {
                tool_call_id,
                content,
            },
        })
        .collect();
    let callable = request.callable_tools();
    let tools = (!callable.is_empty()).then(|| {
        callable
            .iter()
            .map(|t| WireTool {
                kind: "function",
                function: WireToolDef {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.parameters,
                },
            })
            .collect()
    });
    let tool_choice = match (request.tool_choice, &tools) {
        (_, None) => None,
        (Some(ToolChoice::Required), Some(_)) => Some("required"),
        (Some(ToolChoice::Auto), Some(_)) => Some("auto"),
        (None, Some(_)) if compat.tool_choice_auto => Some("auto"),
        (_, Some(_)) => None,
    };
    ChatRequest {
        model: request.model,
        messages,
        tools,
        tool_choice,
        stream,
        stream_options: (stream && !compat.no_stream_options).then_some(StreamOptions {
            include_usage: true,
        }),
        max_tokens: request.max_output_tokens.or(max_tokens),
        temperature: request.sampling.and_then(|s| s.temperature),
        top_p: request.sampling.and_then(|s| s.top_p),
        seed: request.sampling.and_then(|s| s.seed),
        stop: request.sampling.map_or(&[], |s| s.stop.as_slice()),
        response_format: request
            .sampling
            .and_then(|s| s.response_format.as_ref())
            .map(response_format),
    }
}
