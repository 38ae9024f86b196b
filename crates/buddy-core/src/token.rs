use serde::{Deserialize, Serialize};

use crate::{ProviderError, ToolCall};

/// One normalised piece of a model's streamed reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Token {
    /// A fragment of answer text.
    Text { text: String },
    /// A refusal the model gave instead of an answer (OpenAI's `refusal` field); the engine
    /// shows it as the answer text.
    Refusal { text: String },
    /// Reasoning / thinking text: kept for callers, never part of the answer.
    Reasoning { text: String },
    /// The signature that closes a thinking block (Anthropic's `signature_delta`): a
    /// client that sends the block back must send it with it.
    ReasoningSignature { signature: String },
    /// A thinking block the server sent encrypted (Anthropic's `redacted_thinking`).
    RedactedReasoning { data: String },
    /// A complete, executable tool call (providers assemble deltas before yielding).
    ToolCall(ToolCall),
    /// What the server says about its reply (its id, the model that wrote it), before
    /// the reply's first other token; for traces and logs, never part of the answer.
    Response(ResponseInfo),
    /// The end of the reply, with the provider's stated reason and token usage.
    Finish {
        reason: FinishReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
}

/// What a model server says about one reply: OpenAI's `id` and `model` of its chunks,
/// Anthropic's `message.id` and `message.model` of `message_start`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseInfo {
    /// The server's id of the reply (`gen_ai.response.id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The model that wrote it, as the server names it (`gen_ai.response.model`), which
    /// may be more exact than the one asked for (`gpt-4o` → `gpt-4o-2024-08-06`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl ResponseInfo {
    /// The info when the server gave either part, for a [`Token::Response`].
    pub fn of(id: Option<&str>, model: Option<&str>) -> Option<Self> {
        let own = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(str::to_owned);
        let info = ResponseInfo {
            id: own(id),
            model: own(model),
        };
        (info.id.is_some() || info.model.is_some()).then_some(info)
    }
}

/// Why the provider says its reply ended. Recorded, not trusted, by the engine.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
    Other(String),
}

impl FinishReason {
    /// Maps a wire value (`stop`, `tool_calls`, `end_turn`, `max_tokens`, …) to a reason.
    pub fn from_wire(value: &str) -> Self {
        match value {
            "stop" | "end_turn" | "stop_sequence" => FinishReason::Stop,
            "tool_calls" | "tool_use" | "function_call" => FinishReason::ToolCalls,
            "length" | "max_tokens" => FinishReason::Length,
            "content_filter" | "refusal" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

/// Tokens a model call consumed, as the provider reported (or estimated) them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Every input token, cached ones included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The part of `input_tokens` read from the provider's prompt cache (charged at the
    /// cached-input price).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// The part of `input_tokens` written to the prompt cache (Anthropic's
    /// `cache_creation_input_tokens`), one-hour writes included.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// The part of `cache_write_tokens` written for an hour (billed at `cache_write_1h`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_1h_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The stream a provider returns: tokens, or a typed error that ends it.
pub type TokenStream = futures::stream::BoxStream<'static, Result<Token, ProviderError>>;

/// A message's token count, with the counting it was made by (`o200k_base/1`, …): kept
/// with a stored message so that a conversation continued under the same counting is
/// not counted again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenCount {
    /// The encoding and the version of buddy's framing formula; a count is reused only
    /// under exactly the same key.
    pub encoding: String,
    pub tokens: u64,
}
