//! The Messages API request body: `system` at the top, tool calls as `tool_use` blocks,
//! results as `tool_result` blocks in user messages (consecutive ones merged, as the
//! API wants strictly alternating roles).

use buddy_core::{
    Attachment, CacheTtl, CompletionRequest, Message, ResponseFormat, Sampling, ToolChoice,
};
use serde::Serialize;
use serde_json::Value;

use super::breakpoints::{BlockKind, Slot, place};

#[derive(Serialize)]
pub(crate) struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<System<'a>>,
    /// The system messages, one block each when the prompt carries breakpoints.
    #[serde(skip)]
    system_parts: Vec<&'a str>,
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

/// The system prompt: plain text, or a text block per system message when the request
/// carries breakpoints (so a trimming note after the prompt leaves the prompt's cache be).
#[derive(Serialize)]
#[serde(untagged)]
enum System<'a> {
    Text(String),
    Blocks(Vec<SystemBlock<'a>>),
}

#[derive(Serialize)]
struct SystemBlock<'a> {
    r#type: &'static str,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

/// `cache_control` of a block: `ephemeral`, with `ttl` only for the one-hour kind (five
/// minutes is the API's default, and older servers know no `ttl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
struct CacheControl {
    r#type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<&'static str>,
}

impl CacheControl {
    fn of(ttl: CacheTtl) -> Self {
        CacheControl {
            r#type: "ephemeral",
            ttl: (ttl == CacheTtl::OneHour).then_some(ttl.as_str()),
        }
    }
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Marked<'a>>,
}

/// A content block and its breakpoint, if it has one.
#[derive(Serialize)]
struct Marked<'a> {
    #[serde(flatten)]
    block: Block<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
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
/// the API refuses a history with tool blocks and no tool definitions. With `cache`
/// set, buddy's own cache breakpoints go in (`breakpoints.rs`); a client's always do.
pub(crate) fn messages_request<'a>(
    request: &CompletionRequest<'a>,
    stream: bool,
    max_tokens: u32,
    cache: Option<CacheTtl>,
) -> MessagesRequest<'a> {
    let mut system: Vec<&str> = Vec::new();
    let mut messages: Vec<WireMessage<'a>> = Vec::new();
    // Where each message's last block went: its wire message and block (`None`: in the
    // system prompt, or no block).
    let mut ends: Vec<Option<(usize, usize)>> = Vec::with_capacity(request.messages.len());
    let mut push = |role: &'static str, block: Block<'a>| {
        let block = Marked {
            block,
            cache_control: None,
        };
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.push(block),
            _ => messages.push(WireMessage {
                role,
                content: vec![block],
            }),
        }
        messages
            .last()
            .map(|last| (messages.len() - 1, last.content.len() - 1))
    };
    for message in request.messages {
        let mut end = None;
        let mut push = |role, block| end = push(role, block);
        match message {
            Message::System { content } => {
                system.push(content);
                end = Some((SYSTEM, system.len() - 1));
            }
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
        ends.push(end);
    }
    let tools: Option<Vec<WireTool<'a>>> = request.tools.filter(|t| !t.is_empty()).map(|tools| {
        tools
            .iter()
            .map(|t| WireTool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.parameters,
                cache_control: None,
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
    let mut body = MessagesRequest {
        model: request.model,
        max_tokens: request.max_output_tokens.unwrap_or(max_tokens),
        system: (!system.is_empty()).then(|| System::Text(system.join("\n\n"))),
        system_parts: system,
        messages,
        tools,
        tool_choice,
        stream,
        temperature: request.sampling.and_then(|s| s.temperature),
        top_p: request.sampling.and_then(|s| s.top_p),
        stop_sequences: request.sampling.map_or(&[], |s| s.stop.as_slice()),
        output_config: output_config(request),
    };
    mark(&mut body, request, &ends, cache);
    body
}

/// Structured output as `output_config.format`, when the client asked for a JSON schema.
fn output_config(request: &CompletionRequest<'_>) -> Option<Value> {
    match request.sampling?.response_format.as_ref()? {
        ResponseFormat::JsonSchema { schema, .. } => {
            Some(serde_json::json!({"format": {"type": "json_schema", "schema": schema}}))
        }
        ResponseFormat::Text | ResponseFormat::JsonObject => None,
    }
}

/// Puts the breakpoints on `body`: the client's (`request.cache_marks`, on the last block
/// of the message each names; `ends` maps messages to blocks) and, with `cache` set,
/// buddy's own.
fn mark<'a>(
    body: &mut MessagesRequest<'a>,
    request: &CompletionRequest<'_>,
    ends: &[Option<(usize, usize)>],
    cache: Option<CacheTtl>,
) {
    let tools = body.tools.as_ref().map_or(0, Vec::len);
    let system = body.system_parts.len();
    let mut slots: Vec<Slot> = Vec::new();
    slots.extend(std::iter::repeat_n(Slot::of(BlockKind::Tool), tools));
    slots.extend(std::iter::repeat_n(Slot::of(BlockKind::System), system));
    let mut starts = Vec::with_capacity(body.messages.len());
    for message in &body.messages {
        starts.push(slots.len());
        slots.extend(message.content.iter().map(|b| Slot::of(kind(&b.block))));
    }
    for mark in request.cache_marks {
        let block = match request.messages.get(mark.message) {
            Some(_) => match ends.get(mark.message).copied().flatten() {
                Some((SYSTEM, part)) => Some(tools + part),
                Some((m, b)) => Some(starts[m] + b),
                None => None,
            },
            None => None,
        };
        if let Some(slot) = block.and_then(|b| slots.get_mut(b)) {
            slot.client = Some(mark.ttl);
        }
    }
    let client_only = cache.is_none();
    if client_only && slots.iter().all(|s| s.client.is_none()) {
        return;
    }
    let points = place(&slots, cache.unwrap_or_default());
    let mut blocks: Vec<SystemBlock<'a>> = body
        .system_parts
        .iter()
        .map(|&text| SystemBlock {
            r#type: "text",
            text,
            cache_control: None,
        })
        .collect();
    for point in points {
        if client_only && slots[point.block].client.is_none() {
            continue;
        }
        let control = Some(CacheControl::of(point.ttl));
        if point.block < tools {
            if let Some(tool) = body.tools.as_mut().and_then(|t| t.get_mut(point.block)) {
                tool.cache_control = control;
            }
        } else if point.block < tools + system {
            if let Some(block) = blocks.get_mut(point.block - tools) {
                block.cache_control = control;
            }
        } else {
            let m = starts.partition_point(|&s| s <= point.block) - 1;
            if let Some(block) = body.messages[m].content.get_mut(point.block - starts[m]) {
                block.cache_control = control;
            }
        }
    }
    if !blocks.is_empty() && (!client_only || blocks.iter().any(|b| b.cache_control.is_some())) {
        body.system = Some(System::Blocks(blocks));
    }
}

/// Where `ends` puts a system message: not in a wire message but in `system` (its part).
const SYSTEM: usize = usize::MAX;

/// What a content block is to placement: an empty text block cannot carry a breakpoint.
fn kind(block: &Block<'_>) -> BlockKind {
    match block {
        Block::Text { text: "" } => BlockKind::Unmarkable,
        _ => BlockKind::Content,
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
