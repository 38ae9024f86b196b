//! Chat Completions chunks -> tokens.

use std::collections::VecDeque;

use buddy_core::{FinishReason, ProviderError, ResponseInfo, Token, Usage};
use serde::Deserialize;

use crate::http::EventParser;
use crate::lenient::{Arguments, LenientStr, WireUsage, finish_reply};
use crate::sse::SseEvent;
use crate::tool_call_assembler::{ToolCallAssembler, ToolCallDelta};

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    id: LenientStr<'a>,
    #[serde(default, borrow)]
    model: LenientStr<'a>,
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    finish_reason: LenientStr<'a>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: LenientStr<'a>,
    #[serde(default, borrow)]
    refusal: LenientStr<'a>,
    #[serde(default, borrow)]
    reasoning_content: LenientStr<'a>,
    #[serde(default, borrow)]
    reasoning: LenientStr<'a>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<ToolCallPiece<'a>>>,
}

#[derive(Deserialize)]
pub(crate) struct ToolCallPiece<'a> {
    #[serde(default)]
    pub index: Option<i64>,
    #[serde(default, borrow)]
    pub id: LenientStr<'a>,
    #[serde(default, borrow)]
    pub function: Option<FunctionPiece<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct FunctionPiece<'a> {
    #[serde(default, borrow)]
    pub name: LenientStr<'a>,
    #[serde(default, borrow)]
    pub arguments: Option<Arguments<'a>>,
}

impl ToolCallPiece<'_> {
    pub(crate) fn delta(&self) -> ToolCallDelta<'_> {
        ToolCallDelta {
            index: self.index,
            id: self.id.0.as_deref(),
            name: self.function.as_ref().and_then(|f| f.name.0.as_deref()),
            arguments: self
                .function
                .as_ref()
                .and_then(|f| f.arguments.as_ref())
                .map(Arguments::as_str),
        }
    }
}

/// The parser of one Chat Completions stream. Public so tests and benchmarks can
/// drive it without HTTP.
pub struct OpenAiStreamParser {
    provider: String,
    url: String,
    assembler: ToolCallAssembler,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    saw_done: bool,
    /// The reply's id and model went out (every chunk repeats them; once is enough).
    told_response: bool,
}

impl OpenAiStreamParser {
    /// A parser whose errors name `provider` and `url`.
    pub fn new(provider: &str, url: &str) -> Self {
        OpenAiStreamParser {
            provider: provider.to_owned(),
            url: url.to_owned(),
            assembler: ToolCallAssembler::default(),
            finish: None,
            usage: None,
            saw_done: false,
            told_response: false,
        }
    }

    fn stream_error(&self, message: String, retryable: bool) -> ProviderError {
        ProviderError::Stream {
            provider: self.provider.clone(),
            url: self.url.clone(),
            message,
            retryable,
        }
    }

    /// Handles one SSE event; `Ok(true)` at `[DONE]`.
    pub fn event(
        &mut self,
        event: &SseEvent,
        out: &mut VecDeque<Token>,
    ) -> Result<bool, ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.saw_done = true;
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            if event.event.as_deref() == Some("error") {
                return self.stream_error(data.chars().take(300).collect(), false);
            }
            ProviderError::Malformed {
                provider: self.provider.clone(),
                url: self.url.clone(),
                message: format!(
                    "a data line is not valid JSON ({e}): {}",
                    data.chars().take(200).collect::<String>()
                ),
            }
        })?;
        if let Some(error) = chunk.error {
            let (message, retryable) = describe_error(&error);
            return Err(self.stream_error(message, retryable));
        }
        if event.event.as_deref() == Some("error") {
            return Err(self.stream_error(data.chars().take(300).collect(), false));
        }
        if !self.told_response
            && let Some(info) = ResponseInfo::of(chunk.id.non_empty(), chunk.model.non_empty())
        {
            self.told_response = true;
            out.push_back(Token::Response(info));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage::from(usage));
        }
        // Only the first choice is the answer (buddy never asks for n > 1).
        for choice in chunk.choices.iter().filter(|c| c.index.unwrap_or(0) == 0) {
            if let Some(delta) = &choice.delta {
                if let Some(text) = delta.content.non_empty() {
                    out.push_back(Token::Text {
                        text: text.to_owned(),
                    });
                }
                if let Some(text) = delta.refusal.non_empty() {
                    out.push_back(Token::Refusal {
                        text: text.to_owned(),
                    });
                }
                if let Some(text) = delta
                    .reasoning_content
                    .non_empty()
                    .or(delta.reasoning.non_empty())
                {
                    out.push_back(Token::Reasoning {
                        text: text.to_owned(),
                    });
                }
                for piece in delta.tool_calls.iter().flatten() {
                    self.assembler.push(piece.delta());
                }
            }
            // OpenRouter repeats finish_reason in its usage chunk: the first one counts.
            if self.finish.is_none()
                && let Some(reason) = choice.finish_reason.non_empty()
            {
                self.finish = Some(FinishReason::from_wire(reason));
            }
        }
        Ok(false)
    }

    /// The stream ended: emits the assembled calls and one finish, or says why the
    /// calls cannot be trusted.
    pub fn end(&mut self, out: &mut VecDeque<Token>) -> Result<(), ProviderError> {
        let (calls, broken) = std::mem::take(&mut self.assembler).finish();
        for call in &broken {
            tracing::warn!(provider = %self.provider, id = %call.id, "a streamed tool call had no name; it was dropped");
        }
        let cut_off = !self.saw_done && self.finish.is_none();
        if cut_off
            && let Some(call) = calls
                .iter()
                .find(|c| serde_json::from_str::<serde_json::Value>(&c.arguments).is_err())
        {
            return Err(self.stream_error(
                format!(
                    "the stream ended in the middle of tool call `{}` (arguments incomplete); it was not run",
                    call.name
                ),
                false,
            ));
        }
        finish_reply(self.finish.clone(), calls, self.usage, out);
        Ok(())
    }
}

/// The message of an in-stream error object, and whether retrying may help.
pub(crate) fn describe_error(error: &serde_json::Value) -> (String, bool) {
    let message = error
        .get("message")
        .and_then(|m| m.as_str())
        .or_else(|| error.as_str())
        .unwrap_or("unknown error")
        .to_owned();
    let kind = [error.get("type"), error.get("code")]
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let status = error
        .get("status_code")
        .and_then(|s| s.as_u64())
        .unwrap_or(0);
    let retryable = status == 429
        || status >= 500
        || [
            "server_error",
            "overloaded",
            "rate_limit",
            "timeout",
            "internal",
        ]
        .iter()
        .any(|k| kind.contains(k));
    let message = if kind.is_empty() {
        message
    } else {
        format!("{message} ({kind})")
    };
    (message, retryable)
}

impl EventParser for OpenAiStreamParser {
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
}
