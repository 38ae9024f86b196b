//! A Messages request as buddy's history: `system` as a system message, text and
//! attachments as user messages, `tool_use` blocks as tool calls and `tool_result`
//! blocks as tool results in the order the client sent them.

use buddy_core::{Attachment, Message, ToolCall, ToolSpec};
use serde_json::Value;

use super::request::{
    BlockSource, ContentBlock, InputMessage, KnownBlock, MessageContent, SystemPrompt, ToolDef,
    ToolResultContent,
};

/// A request's history as buddy's messages, and what of it buddy's messages cannot carry.
#[derive(Debug, Default, PartialEq)]
pub struct ToHistory {
    pub messages: Vec<Message>,
    /// Blocks the client marked with `cache_control` (buddy's messages keep no marks).
    pub cache_marks: usize,
    /// Thinking blocks (and their signatures) of earlier replies, not carried.
    pub thinking_blocks: usize,
    /// Images inside tool results, carried as a short text saying one was there.
    pub tool_result_images: usize,
}

/// buddy's history for a request's `system` and `messages`, or what is wrong with them
/// (naming the message and block).
pub fn to_messages(
    system: Option<&SystemPrompt>,
    messages: &[InputMessage],
) -> Result<ToHistory, String> {
    let mut out = ToHistory::default();
    if let Some(system) = system {
        if let SystemPrompt::Blocks(blocks) = system {
            out.cache_marks += blocks.iter().filter(|b| b.cache_control.is_some()).count();
        }
        let text = system.text();
        if !text.is_empty() {
            out.messages.push(Message::system(text));
        }
    }
    for (i, message) in messages.iter().enumerate() {
        let blocks = match &message.content {
            MessageContent::Text(text) => {
                out.messages.push(match message.role.as_str() {
                    "user" => Message::user(text.clone()),
                    "assistant" => Message::assistant(text.clone()),
                    "system" => Message::system(text.clone()),
                    other => return Err(bad_role(i, other)),
                });
                continue;
            }
            MessageContent::Blocks(blocks) => blocks,
        };
        let read = match message.role.as_str() {
            "user" => user_message(blocks, &mut out),
            "assistant" => assistant_message(blocks, &mut out),
            "system" => system_message(blocks, &mut out),
            other => return Err(bad_role(i, other)),
        };
        read.map_err(|e| format!("messages[{i}]: {e}"))?;
    }
    Ok(out)
}

fn bad_role(i: usize, role: &str) -> String {
    format!("messages[{i}]: unknown role `{role}`; use user, assistant or system")
}

/// A system message between the turns (Claude Code 2.1 sends one after the user's
/// first message, its environment and instructions, with the `per-turn-control` beta):
/// its text blocks as a system message, which every provider keeps as instructions.
fn system_message(blocks: &[ContentBlock], out: &mut ToHistory) -> Result<(), String> {
    let mut texts = Vec::new();
    for (n, block) in blocks.iter().enumerate() {
        match known(block).map_err(|e| format!("content[{n}]: {e}"))? {
            KnownBlock::Text {
                text,
                cache_control,
                ..
            } => {
                out.cache_marks += usize::from(cache_control.is_some());
                texts.push(text.as_str());
            }
            _ => {
                return Err(format!(
                    "content[{n}]: a system message holds text blocks, not a `{}` block",
                    block_type(block)
                ));
            }
        }
    }
    let text = texts.join("\n\n");
    if !text.is_empty() {
        out.messages.push(Message::system(text));
    }
    Ok(())
}

/// A user message's blocks: its tool results (in order) first, then its text and
/// attachments — as a user message, or, beside tool results, as text the model reads
/// with them (a note), so the rounds of one turn stay together.
fn user_message(blocks: &[ContentBlock], out: &mut ToHistory) -> Result<(), String> {
    let mut texts = Vec::new();
    let mut attachments = Vec::new();
    let mut results = Vec::new();
    for (n, block) in blocks.iter().enumerate() {
        let known = known(block).map_err(|e| format!("content[{n}]: {e}"))?;
        out.cache_marks += usize::from(marked(known));
        match known {
            KnownBlock::Text { text, .. } => texts.push(text.clone()),
            KnownBlock::Image { source, .. } => attachments.push(image(source)?),
            KnownBlock::Document { source, title, .. } => match document(source, title)? {
                Document::Text(text) => texts.push(text),
                Document::File(file) => attachments.push(file),
            },
            KnownBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } => {
                let text =
                    result_text(content.as_ref(), out).map_err(|e| format!("content[{n}]: {e}"))?;
                results.push(Message::tool_result(tool_use_id.clone(), text, *is_error));
            }
            KnownBlock::ToolUse { .. } | KnownBlock::Thinking { .. } => {
                return Err(format!(
                    "content[{n}]: a user message cannot hold a `{}` block",
                    block_type(block)
                ));
            }
            KnownBlock::RedactedThinking { .. } => {
                return Err(format!(
                    "content[{n}]: a user message cannot hold a `redacted_thinking` block"
                ));
            }
        }
    }
    let had_results = !results.is_empty();
    out.messages.append(&mut results);
    let text = texts.join("\n\n");
    if had_results && attachments.is_empty() {
        if !text.is_empty() {
            out.messages.push(Message::note(text));
        }
    } else if !text.is_empty() || !attachments.is_empty() {
        out.messages.push(Message::user_with(text, attachments));
    }
    Ok(())
}

/// An assistant message's blocks: its text and its tool calls (thinking is not carried).
fn assistant_message(blocks: &[ContentBlock], out: &mut ToHistory) -> Result<(), String> {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for (n, block) in blocks.iter().enumerate() {
        let known = known(block).map_err(|e| format!("content[{n}]: {e}"))?;
        out.cache_marks += usize::from(marked(known));
        match known {
            KnownBlock::Text { text, .. } => texts.push(text.clone()),
            KnownBlock::ToolUse {
                id, name, input, ..
            } => {
                let arguments = match input {
                    Value::Null => "{}".to_owned(),
                    input => input.to_string(),
                };
                calls.push(ToolCall::new(id.clone(), name.clone(), arguments));
            }
            KnownBlock::Thinking { .. } | KnownBlock::RedactedThinking { .. } => {
                out.thinking_blocks += 1;
            }
            _ => {
                return Err(format!(
                    "content[{n}]: an assistant message cannot hold a `{}` block",
                    block_type(block)
                ));
            }
        }
    }
    let text = texts.concat();
    out.messages.push(Message::Assistant {
        content: (!text.is_empty()).then_some(text),
        tool_calls: calls,
    });
    Ok(())
}

/// The block, if buddy reads its type; a clear error for one it does not.
fn known(block: &ContentBlock) -> Result<&KnownBlock, String> {
    match block {
        ContentBlock::Known(known) => Ok(known),
        ContentBlock::Other(value) => Err(match value.get("type").and_then(Value::as_str) {
            Some(
                kind @ ("text" | "image" | "document" | "tool_use" | "tool_result" | "thinking"
                | "redacted_thinking"),
            ) => {
                format!("this `{kind}` block lacks a field it needs or has one of the wrong type")
            }
            Some(kind) => format!(
                "blocks of type `{kind}` are not supported by buddy; send text, image, document, tool_use, tool_result or thinking"
            ),
            None => "a content block needs a `type`".into(),
        }),
    }
}

fn block_type(block: &ContentBlock) -> String {
    serde_json::to_value(block)
        .ok()
        .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default()
}

fn marked(block: &KnownBlock) -> bool {
    match block {
        KnownBlock::Text { cache_control, .. }
        | KnownBlock::Image { cache_control, .. }
        | KnownBlock::Document { cache_control, .. }
        | KnownBlock::ToolUse { cache_control, .. }
        | KnownBlock::ToolResult { cache_control, .. } => cache_control.is_some(),
        KnownBlock::Thinking { .. } | KnownBlock::RedactedThinking { .. } => false,
    }
}

/// An image block as an attachment (checked as every attachment is).
fn image(source: &BlockSource) -> Result<Attachment, String> {
    let url = match source {
        BlockSource::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
        BlockSource::Url { url } => url.clone(),
        _ => {
            return Err(
                "an image needs a `base64` or `url` source (files by id need a Files API buddy does not have)"
                    .into(),
            );
        }
    };
    Attachment::Image { url, detail: None }
        .checked()
        .map_err(|e| format!("image: {e}"))
}

enum Document {
    Text(String),
    File(Attachment),
}

/// A document block: a plain-text one as text, a base64 one (a PDF) as a file.
fn document(source: &BlockSource, title: &Option<String>) -> Result<Document, String> {
    match source {
        BlockSource::Text { data, .. } => Ok(Document::Text(match title {
            Some(title) => format!("{title}\n\n{data}"),
            None => data.clone(),
        })),
        BlockSource::Base64 { media_type, data } => {
            let file = Attachment::File {
                filename: title.clone(),
                data: format!("data:{media_type};base64,{data}"),
            };
            file.check().map_err(|e| format!("document: {e}"))?;
            Ok(Document::File(file))
        }
        _ => Err(
            "a document needs a `base64` or `text` source (by URL or file id buddy cannot fetch it)"
                .into(),
        ),
    }
}

/// A tool result's text: its string, or its text blocks joined; an image in it becomes a
/// line saying one was there (buddy's tool results are text).
fn result_text(content: Option<&ToolResultContent>, out: &mut ToHistory) -> Result<String, String> {
    let blocks = match content {
        None => return Ok(String::new()),
        Some(ToolResultContent::Text(text)) => return Ok(text.clone()),
        Some(ToolResultContent::Blocks(blocks)) => blocks,
    };
    let mut texts = Vec::new();
    for block in blocks {
        match known(block)? {
            KnownBlock::Text { text, .. } => texts.push(text.clone()),
            KnownBlock::Image { .. } => {
                out.tool_result_images += 1;
                texts.push(
                    "[an image the tool returned; buddy passes tool results on as text]".into(),
                );
            }
            KnownBlock::Document {
                source: BlockSource::Text { data, .. },
                ..
            } => texts.push(data.clone()),
            _ => {
                return Err(format!(
                    "a tool result holds text and images, not a `{}` block",
                    block_type(block)
                ));
            }
        }
    }
    Ok(texts.join("\n"))
}

/// The tools the client defines and runs (as buddy's tool specs), and the names of the
/// others (Anthropic's own server and client tools), which buddy leaves out.
pub fn client_tools(tools: &[ToolDef]) -> (Vec<ToolSpec>, Vec<String>) {
    let mut specs = Vec::new();
    let mut left_out = Vec::new();
    for tool in tools {
        if !tool.is_custom() {
            left_out.push(tool.name.clone());
            continue;
        }
        specs.push(ToolSpec {
            name: tool.name.clone(),
            description: tool.description.clone().unwrap_or_default(),
            parameters: tool
                .input_schema
                .clone()
                .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
        });
    }
    (specs, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn history(system: Value, messages: Value) -> Result<ToHistory, String> {
        let system: Option<SystemPrompt> = serde_json::from_value(system).unwrap();
        let messages: Vec<InputMessage> = serde_json::from_value(messages).unwrap();
        to_messages(system.as_ref(), &messages)
    }

    #[test]
    fn a_tool_round_trip_becomes_calls_and_results_with_the_text_beside_them_as_a_note() {
        let read = history(
            json!([{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
                   {"type": "text", "text": "Use tools."}]),
            json!([
                {"role": "user", "content": "list files"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                    {"type": "tool_use", "id": "t2", "name": "Read", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"},
                    {"type": "tool_result", "tool_use_id": "t2", "is_error": true,
                     "content": [{"type": "text", "text": "no such file"},
                                 {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]},
                    {"type": "text", "text": "<system-reminder>be careful</system-reminder>"}]}
            ]),
        )
        .unwrap();
        assert_eq!(
            read.messages,
            vec![
                Message::system("Be brief.\n\nUse tools."),
                Message::user("list files"),
                Message::Assistant {
                    content: Some("Looking.".into()),
                    tool_calls: vec![
                        ToolCall::new("t1", "Bash", r#"{"command":"ls"}"#),
                        ToolCall::new("t2", "Read", "{}"),
                    ],
                },
                Message::tool_result("t1", "a.txt", false),
                Message::tool_result(
                    "t2",
                    "no such file\n[an image the tool returned; buddy passes tool results on as text]",
                    true
                ),
                Message::note("<system-reminder>be careful</system-reminder>"),
            ]
        );
        assert_eq!(
            (
                read.cache_marks,
                read.thinking_blocks,
                read.tool_result_images
            ),
            (1, 1, 1)
        );
    }

    #[test]
    fn a_system_message_between_the_turns_is_kept_as_instructions() {
        // Claude Code 2.1.328's first request: the user's prompt, then its environment as
        // a system message with a cache mark.
        let read = history(
            json!([{"type": "text", "text": "You are an agent."}]),
            json!([
                {"role": "user", "content": [{"type": "text", "text": "What files are here?"}]},
                {"role": "system", "content": [{"type": "text", "text": "# Environment",
                    "cache_control": {"type": "ephemeral"}}]},
                {"role": "system", "content": "Be brief."}
            ]),
        )
        .unwrap();
        assert_eq!(
            read.messages,
            vec![
                Message::system("You are an agent."),
                Message::user("What files are here?"),
                Message::system("# Environment"),
                Message::system("Be brief."),
            ]
        );
        assert_eq!(read.cache_marks, 1);
        let tool_use = history(
            Value::Null,
            json!([{"role": "system", "content": [{"type": "tool_use", "id": "a", "name": "b", "input": {}}]}]),
        );
        assert_eq!(
            tool_use.unwrap_err(),
            "messages[0]: content[0]: a system message holds text blocks, not a `tool_use` block"
        );
    }

    #[test]
    fn images_and_documents_are_attachments() {
        let read = history(
            Value::Null,
            json!([{"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
                {"type": "document", "title": "notes", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]}]),
        )
        .unwrap();
        assert_eq!(
            read.messages,
            vec![Message::user_with(
                "what is this?\n\nnotes\n\nx",
                vec![Attachment::Image {
                    url: "https://example.com/a.png".into(),
                    detail: None
                }]
            )]
        );
    }

    #[test]
    fn bad_histories_are_named_by_message_and_block() {
        let robot = history(Value::Null, json!([{"role": "robot", "content": "x"}]));
        assert_eq!(
            robot.unwrap_err(),
            "messages[0]: unknown role `robot`; use user, assistant or system"
        );
        let server = history(
            Value::Null,
            json!([{"role": "user", "content": [{"type": "container_upload", "file_id": "f"}]}]),
        );
        assert!(
            server
                .unwrap_err()
                .starts_with("messages[0]: content[0]: blocks of type `container_upload`")
        );
        let broken = history(
            Value::Null,
            json!([{"role": "assistant", "content": [{"type": "tool_use", "name": "Bash"}]}]),
        );
        assert!(
            broken
                .unwrap_err()
                .contains("this `tool_use` block lacks a field")
        );
        let misplaced = history(
            Value::Null,
            json!([{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "b", "input": {}}]}]),
        );
        assert!(
            misplaced
                .unwrap_err()
                .contains("a user message cannot hold a `tool_use` block")
        );
        let local_file = history(
            Value::Null,
            json!([{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "file:///etc/passwd"}}]}]),
        );
        assert!(local_file.unwrap_err().contains("image:"));
    }

    #[test]
    fn anthropics_own_tools_are_left_out_and_named() {
        let tools: Vec<ToolDef> = serde_json::from_value(json!([
            {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}},
            {"type": "custom", "name": "Read", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search"}
        ]))
        .unwrap();
        let (specs, left_out) = client_tools(&tools);
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["Bash", "Read"]);
        assert_eq!(left_out, ["web_search"]);
    }
}
