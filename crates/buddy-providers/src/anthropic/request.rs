//! The Messages API request body: `system` at the top, tool calls as `tool_use` blocks,
//! results as `tool_result` blocks in user messages (consecutive ones merged, as the
//! API wants strictly alternating roles).

use buddy_core::{Attachment, CompletionRequest, Message, ResponseFormat, Sampling, ToolChoice};
use serde::Serialize;
use serde_json::Value;

#[derive(Serialize)]
pub(crate) struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<WireTool<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    /// Structured output (`output_config.format`, generally available).
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    Image {
        source: Value,
    },
    Document {
        source: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<&'a str>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum WireToolChoice {
    Auto,
    Any,
    None,
}

/// Tool arguments as the object `input` must be; text that is not a JSON object
/// (a model's malformed call, already answered with an error) becomes `{}`.
fn input_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => Value::Object(serde_json::Map::new()),
    }
}

/// Builds the body. Under `tool_choice: none` (buddy's Finalize) the tools stay defined:
/// the API refuses a history with tool blocks and no tool definitions.
pub(crate) fn messages_request<'a>(
    request: &CompletionRequest<'a>,
    stream: bool,
    max_tokens: u32,
) -> MessagesRequest<'a> {
    let mut system: Vec<&str> = Vec::new();
    let mut messages: Vec<WireMessage<'a>> = Vec::new();
    let mut push = |role: &'static str, block: Block<'a>| match messages.last_mut() {
        Some(last) if last.role == role => last.content.push(block),
        _ => messages.push(WireMessage {
            role,
            content: vec![block],
        }),
    };
    for message in request.messages {
        match message {
            Message::System { content } => system.push(content),
            // A note joins the user message that holds the tool results, as a text block after
            // them: the API has no mid-conversation system message, and inside a
            // `tool_result` an instruction would read as the tool's (untrusted) output.
            Message::User {
                content,
                attachments,
            } => {
                for attachment in attachments {
                    push("user", attachment_block(attachment));
                }
                if !content.is_empty() || attachments.is_empty() {
                    push("user", Block::Text { text: content });
                }
            }
            Message::Note { content } => push("user", Block::Text { text: content }),
            Message::Tool {
                tool_call_id,
                content,
                is_error,
            } => push(
                "user",
                Block::ToolResult {
                    tool_use_id: tool_call_id,
                    content,
                    is_error: *is_error,
                },
            ),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                if let Some(text) = content.as_deref().filter(|t| !t.trim().is_empty()) {
                    push("assistant", Block::Text { text });
                }
                for call in tool_calls {
                    push(
                        "assistant",
                        Block::ToolUse {
                            id: &call.id,
                            name: &call.name,
                            input: input_object(&call.arguments),
                        },
                    );
                }
            }
        }
    }
    let tools = request.tools.filter(|t| !t.is_empty()).map(|tools| {
        tools
            .iter()
            .map(|t| WireTool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.parameters,
            })
            .collect()
    });
    let tool_choice = tools
        .as_ref()
        .and(request.tool_choice)
        .map(|choice| match choice {
            ToolChoice::Auto => WireToolChoice::Auto,
            ToolChoice::Required => WireToolChoice::Any,
            ToolChoice::None => WireToolChoice::None,
        });
    MessagesRequest {
        model: request.model,
        max_tokens: request.max_output_tokens.unwrap_or(max_tokens),
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        messages,
        tools,
        tool_choice,
        stream,
        temperature: request.sampling.and_then(|s| s.temperature),
        top_p: request.sampling.and_then(|s| s.top_p),
        stop_sequences: request.sampling.map_or(&[], |s| s.stop.as_slice()),
        output_config: request
            .sampling
            .and_then(|s| s.response_format.as_ref())
            .and_then(|format| match format {
                ResponseFormat::JsonSchema { schema, .. } => {
                    Some(serde_json::json!({"format": {"type": "json_schema", "schema": schema}}))
                }
                ResponseFormat::Text | ResponseFormat::JsonObject => None,
            }),
    }
}

/// An image or a file as a Messages API content block: base64 from a `data:` URL, or
/// the URL itself. Images go before the text, as Anthropic recommends.
fn attachment_block(attachment: &Attachment) -> Block<'_> {
    let source = |url: &str| match Attachment::data_parts(url) {
        Some((media_type, data)) => {
            serde_json::json!({"type": "base64", "media_type": media_type, "data": data})
        }
        None => serde_json::json!({"type": "url", "url": url}),
    };
    match attachment {
        Attachment::Image { url, .. } => Block::Image {
            source: source(url),
        },
        Attachment::File { filename, data } => Block::Document {
            source: source(data),
            title: filename.as_deref(),
        },
    }
}

/// Why the Messages API cannot take `attachment`: it reads images and PDF documents.
pub(crate) fn refuses(provider: &str, attachment: &Attachment) -> Option<String> {
    let Attachment::File { data, filename } = attachment else {
        return None;
    };
    match Attachment::data_parts(data) {
        Some(("application/pdf", _)) => None,
        Some((media, _)) => Some(format!(
            "provider `{provider}` (Anthropic Messages API) reads PDF files, not `{media}` ({})",
            filename.as_deref().unwrap_or("the file")
        )),
        None => Some(format!(
            "provider `{provider}` needs a file as a data: URL (data:application/pdf;base64,…)"
        )),
    }
}

/// The first setting of `sampling` Anthropic's Messages API cannot honour, in words.
pub(crate) fn unsupported(provider: &str, sampling: &Sampling) -> Option<String> {
    if sampling.seed.is_some() {
        return Some(format!(
            "provider `{provider}` (Anthropic Messages API) does not take `seed`; leave it out"
        ));
    }
    if sampling.response_format == Some(ResponseFormat::JsonObject) {
        return Some(format!(
            "provider `{provider}` (Anthropic Messages API) does not take `response_format` of type json_object; give a json_schema instead"
        ));
    }
    None
}
