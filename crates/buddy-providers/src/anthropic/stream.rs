//! Messages API stream events -> tokens.

use std::collections::VecDeque;

use buddy_core::{FinishReason, ProviderError, ResponseInfo, Token, ToolCall, Usage};
use serde::Deserialize;

use crate::http::EventParser;
use crate::lenient::{LenientStr, WireUsage, finish_reply};
use crate::sse::SseEvent;

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default, rename = "type", borrow)]
    kind: LenientStr<'a>,
    #[serde(default)]
    index: Option<usize>,
    #[serde(default, borrow)]
    content_block: Option<ContentBlock<'a>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    message: Option<MessageStart>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
pub(crate) struct ContentBlock<'a> {
    #[serde(default, rename = "type", borrow)]
    pub kind: LenientStr<'a>,
    #[serde(default, borrow)]
    pub id: LenientStr<'a>,
    #[serde(default, borrow)]
    pub name: LenientStr<'a>,
    #[serde(default, borrow)]
    pub text: LenientStr<'a>,
    #[serde(default, borrow)]
    pub thinking: LenientStr<'a>,
    /// A thinking block's signature (whole replies; streamed, it comes as a delta).
    #[serde(default, borrow)]
    pub signature: LenientStr<'a>,
    /// A `redacted_thinking` block's encrypted thinking.
    #[serde(default, borrow)]
    pub data: LenientStr<'a>,
    #[serde(default)]
    pub input: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, rename = "type", borrow)]
    kind: LenientStr<'a>,
    #[serde(default, borrow)]
    text: LenientStr<'a>,
    #[serde(default, borrow)]
    partial_json: LenientStr<'a>,
    #[serde(default, borrow)]
    thinking: LenientStr<'a>,
    #[serde(default, borrow)]
    signature: LenientStr<'a>,
    #[serde(default, borrow)]
    stop_reason: LenientStr<'a>,
}

#[derive(Deserialize)]
struct MessageStart {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

enum Block {
    Text,
    Thinking,
    ToolUse {
        id: String,
        name: String,
        /// `input` of the start event, used when no fragment follows.
        start_input: String,
        json: String,
        closed: bool,
    },
    /// Server-side tool blocks and anything unknown: skipped.
    Other,
}

/// The parser of one Messages stream. Public so tests and benchmarks can drive it.
pub struct AnthropicStreamParser {
    provider: String,
    url: String,
    blocks: Vec<(usize, Block)>,
    stop: Option<FinishReason>,
    usage: Option<Usage>,
    saw_stop: bool,
}

/// Anthropic error types a retry can help with.
const RETRYABLE: [&str; 4] = [
    "overloaded_error",
    "api_error",
    "rate_limit_error",
    "timeout_error",
];

impl AnthropicStreamParser {
    /// A parser whose errors name `provider` and `url`.
    pub fn new(provider: &str, url: &str) -> Self {
        AnthropicStreamParser {
            provider: provider.to_owned(),
            url: url.to_owned(),
            blocks: Vec::new(),
            stop: None,
            usage: None,
            saw_stop: false,
        }
    }

    fn block(&mut self, index: Option<usize>) -> Option<&mut Block> {
        let index = index?;
        self.blocks
            .iter_mut()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
    }

    /// Handles one SSE event; `Ok(true)` at `message_stop`.
    pub fn event(
        &mut self,
        event: &SseEvent,
        out: &mut VecDeque<Token>,
    ) -> Result<bool, ProviderError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        let parsed: Event = serde_json::from_str(data).map_err(|e| ProviderError::Malformed {
            provider: self.provider.clone(),
            url: self.url.clone(),
            message: format!(
                "a data line is not valid JSON ({e}): {}",
                data.chars().take(200).collect::<String>()
            ),
        })?;
        let kind = parsed
            .kind
            .non_empty()
            .or(event.event.as_deref())
            .unwrap_or("");
        match kind {
            "message_start" => self.message_start(parsed.message, out),
            "content_block_start" => self.block_start(parsed.index, parsed.content_block, out),
            "content_block_delta" => self.block_delta(parsed.index, parsed.delta, out),
            "content_block_stop" => {
                if let Some(Block::ToolUse { closed, .. }) = self.block(parsed.index) {
                    *closed = true;
                }
            }
            "message_delta" => self.message_delta(parsed.delta.as_ref(), parsed.usage),
            "message_stop" => {
                self.saw_stop = true;
                return Ok(true);
            }
            "error" => return Err(self.stream_error(parsed.error.unwrap_or_default())),
            _ => {}
        }
        Ok(false)
    }

    /// `message_start`: the reply's id and model, and the first usage counts.
    fn message_start(&mut self, message: Option<MessageStart>, out: &mut VecDeque<Token>) {
        let Some(message) = message else {
            return;
        };
        if let Some(info) = ResponseInfo::of(message.id.as_deref(), message.model.as_deref()) {
            out.push_back(Token::Response(info));
        }
        if let Some(usage) = message.usage {
            self.usage = Some(Usage::from(usage));
        }
    }

    /// `content_block_start`: a new block, with any text it already carries.
    fn block_start(
        &mut self,
        index: Option<usize>,
        block: Option<ContentBlock<'_>>,
        out: &mut VecDeque<Token>,
    ) {
        let (Some(index), Some(block)) = (index, block) else {
            return;
        };
        let new = match block.kind.non_empty().unwrap_or("") {
            "text" => {
                if let Some(text) = block.text.non_empty() {
                    out.push_back(Token::Text {
                        text: text.to_owned(),
                    });
                }
                Block::Text
            }
            "thinking" => {
                if let Some(text) = block.thinking.non_empty() {
                    out.push_back(Token::Reasoning {
                        text: text.to_owned(),
                    });
                }
                Block::Thinking
            }
            "redacted_thinking" => {
                if let Some(data) = block.data.non_empty() {
                    out.push_back(Token::RedactedReasoning {
                        data: data.to_owned(),
                    });
                }
                Block::Other
            }
            "tool_use" => Block::ToolUse {
                id: block.id.non_empty().unwrap_or_default().to_owned(),
                name: block.name.non_empty().unwrap_or_default().to_owned(),
                start_input: block
                    .input
                    .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
                json: String::new(),
                closed: false,
            },
            _ => Block::Other,
        };
        self.blocks.push((index, new));
    }

    /// `content_block_delta`: text, thinking or a piece of a tool call's arguments, for
    /// the block it names.
    fn block_delta(
        &mut self,
        index: Option<usize>,
        delta: Option<Delta<'_>>,
        out: &mut VecDeque<Token>,
    ) {
        let Some(delta) = delta else {
            return;
        };
        match (delta.kind.non_empty().unwrap_or(""), self.block(index)) {
            ("text_delta", Some(Block::Text)) => {
                if let Some(text) = delta.text.non_empty() {
                    out.push_back(Token::Text {
                        text: text.to_owned(),
                    });
                }
            }
            ("thinking_delta", Some(Block::Thinking)) => {
                if let Some(text) = delta.thinking.non_empty() {
                    out.push_back(Token::Reasoning {
                        text: text.to_owned(),
                    });
                }
            }
            ("signature_delta", Some(Block::Thinking)) => {
                if let Some(signature) = delta.signature.non_empty() {
                    out.push_back(Token::ReasoningSignature {
                        signature: signature.to_owned(),
                    });
                }
            }
            ("input_json_delta", Some(Block::ToolUse { json, .. })) => {
                if let Some(piece) = delta.partial_json.0.as_deref() {
                    json.push_str(piece);
                }
            }
            _ => {}
        }
    }

    /// `message_delta`: the stop reason and the final usage counts.
    fn message_delta(&mut self, delta: Option<&Delta<'_>>, usage: Option<WireUsage>) {
        if let Some(reason) = delta.and_then(|d| d.stop_reason.non_empty()) {
            self.stop = Some(FinishReason::from_wire(reason));
        }
        // The final counts: `output_tokens` always, `input_tokens` (and the cache
        // counts) when the server revises them here (server tools do).
        if let Some(wire) = usage {
            let usage = self.usage.get_or_insert_with(Usage::default);
            if let Some(output) = wire.output() {
                usage.output_tokens = output;
            }
            if let Some(input) = wire.input() {
                usage.input_tokens = input;
                usage.cached_input_tokens = wire.cached();
                usage.cache_write_tokens = wire.written();
                usage.cache_write_1h_tokens = wire.written_1h();
            }
        }
    }

    /// An `error` event, retryable when its type says a retry can help.
    fn stream_error(&self, error: serde_json::Value) -> ProviderError {
        let kind = error
            .get("type")
            .and_then(|t| t.as_str())
            .unwrap_or("error");
        let message = error
            .get("message")
            .and_then(|m| m.as_str())
            .unwrap_or("unknown error");
        ProviderError::Stream {
            provider: self.provider.clone(),
            url: self.url.clone(),
            message: format!("{message} ({kind})"),
            retryable: RETRYABLE.contains(&kind),
        }
    }

    /// The stream ended: emits complete tool calls and one finish.
    pub fn end(&mut self, out: &mut VecDeque<Token>) -> Result<(), ProviderError> {
        let cut_off = !self.saw_stop && self.stop.is_none();
        let mut calls = Vec::new();
        for (_, block) in std::mem::take(&mut self.blocks) {
            let Block::ToolUse {
                id,
                name,
                start_input,
                json,
                closed,
            } = block
            else {
                continue;
            };
            if !closed {
                if cut_off {
                    return Err(ProviderError::Stream {
                        provider: self.provider.clone(),
                        url: self.url.clone(),
                        message: format!(
                            "the stream ended in the middle of tool call `{name}`; it was not run"
                        ),
                        retryable: false,
                    });
                }
                tracing::warn!(provider = %self.provider, %name, "tool_use block never closed; not run");
                continue;
            }
            // An empty `partial_json` alone means no arguments: `{}`.
            let arguments = if !json.trim().is_empty() {
                json
            } else if !start_input.is_empty() {
                start_input
            } else {
                "{}".to_owned()
            };
            calls.push(ToolCall::new(id, name, arguments));
        }
        finish_reply(self.stop.clone(), calls, self.usage, out);
        Ok(())
    }
}

impl EventParser for AnthropicStreamParser {
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut VecDeque<Token>,
    ) -> Result<bool, ProviderError> {
        self.event(event, out)
    }

    fn on_end(&mut self, out: &mut VecDeque<Token>) -> Result<(), ProviderError> {
        self.end(out)
    }

    /// Anthropic keeps a slow stream open with `ping` events.
    fn is_keep_alive(&self, event: &SseEvent) -> bool {
        let data = event.data.trim();
        data.is_empty()
            || event.event.as_deref() == Some("ping")
            || (data.len() < 64
                && serde_json::from_str::<Event<'_>>(data)
                    .is_ok_and(|e| e.kind.0.as_deref() == Some("ping")))
    }
}
