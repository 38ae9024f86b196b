//! The Chat Completions request body for a provider: what goes in it, with each
//! server's quirks (`OpenAiCompat`); its shape is `buddy-openai-wire`'s.

use buddy_core::{CompletionRequest, Message, ToolChoice};
use buddy_openai_wire::{
    BodyMessage, ChatBody, StreamOptions, WireTool, WireToolCall, response_format_value,
    user_content_value,
};
use serde_json::json;

use super::{OpenAiCompat, OutputLimitField};

/// Builds the body. Tools defined but not callable (`tool_choice: none`, buddy's
/// Finalize) go with `tool_choice: "none"` where the server takes it
/// (`compat.tool_choice_none`: the request keeps the previous one as its prefix, for the
/// prompt cache), else are left out entirely: the strongest "no tools" every compatible
/// server understands.
pub(crate) fn chat_request<'a>(
    request: &CompletionRequest<'a>,
    stream: bool,
    compat: &'a OpenAiCompat,
    max_tokens: Option<u32>,
    limit_field: OutputLimitField,
) -> ChatBody<'a> {
    let limit = request.max_output_tokens.or(max_tokens);
    let messages = request
        .messages
        .iter()
        .map(|m| match m {
            Message::System { content } => BodyMessage::System { content },
            // buddy's notes go as system messages, which no model takes for the user
            // speaking (OpenAI's API takes them anywhere and hands them to reasoning models
            // as developer messages); a server whose template refuses a system message
            // after the first gets them as user text (`compat.notes_as_user`).
            Message::Note { content } if !compat.notes_as_user => BodyMessage::System { content },
            Message::User {
                content,
                attachments,
            } => BodyMessage::User {
                content: user_content_value(content, attachments),
            },
            Message::Note { content } => BodyMessage::User {
                content: json!(content),
            },
            Message::Assistant {
                content,
                tool_calls,
            } => BodyMessage::Assistant {
                content: match content.as_deref() {
                    Some(text) if !text.is_empty() => Some(text),
                    _ if compat.assistant_content_empty_string => Some(""),
                    _ => None,
                },
                tool_calls: tool_calls
                    .iter()
                    .map(|c| WireToolCall::function(&c.id, &c.name, &c.arguments))
                    .collect(),
            },
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => BodyMessage::Tool {
                tool_call_id,
                content,
            },
        })
        .collect();
    let keep_defined =
        request.tool_choice == Some(ToolChoice::None) && compat.tool_choice_none == Some(true);
    let sent = match keep_defined {
        true => request.tools.unwrap_or_default(),
        false => request.callable_tools(),
    };
    let tools = (!sent.is_empty()).then(|| sent.iter().map(WireTool::function).collect());
    let tool_choice = match (request.tool_choice, &tools) {
        (_, None) => None,
        (Some(ToolChoice::None), Some(_)) => Some("none"),
        (Some(ToolChoice::Required), Some(_)) => Some("required"),
        (Some(ToolChoice::Auto), Some(_)) => Some("auto"),
        (None, Some(_)) if compat.tool_choice_auto => Some("auto"),
        (_, Some(_)) => None,
    };
    ChatBody {
        model: request.model,
        messages,
        tools,
        tool_choice,
        stream,
        stream_options: (stream && !compat.no_stream_options).then_some(StreamOptions {
            include_usage: true,
        }),
        max_tokens: limit.filter(|_| limit_field == OutputLimitField::MaxTokens),
        max_completion_tokens: limit
            .filter(|_| limit_field == OutputLimitField::MaxCompletionTokens),
        temperature: request.sampling.and_then(|s| s.temperature),
        top_p: request.sampling.and_then(|s| s.top_p),
        seed: request.sampling.and_then(|s| s.seed),
        stop: request.sampling.map_or(&[], |s| s.stop.as_slice()),
        response_format: request
            .sampling
            .and_then(|s| s.response_format.as_ref())
            .map(response_format_value),
        prompt_cache_key: request
            .cache_key
            .filter(|_| compat.prompt_cache_key == Some(true)),
        prompt_cache_retention: compat.prompt_cache_retention.as_deref(),
    }
}
