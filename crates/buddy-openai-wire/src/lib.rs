//! OpenAI's two APIs on the wire — Chat Completions and Responses — and their
//! translation to and from buddy's messages, typed once: read from clients by the
//! OpenAI-compatible endpoints of `buddy serve` and by `buddy mock-server`, written to
//! providers by buddy's OpenAI client ([`ChatBody`]). Tool calls, tool definitions,
//! content parts and response formats are the same types and code on both sides.

mod chat;
pub mod completion;
mod content;
mod outgoing;
pub mod responses;
mod tools;

use buddy_core::{StopReason, TurnStats};
use serde::Serialize;

pub use chat::{ChatCompletionRequest, StreamOptions, WireMessage, to_messages};
pub use content::{
    response_format, response_format_value, text_of, user_content, user_content_value,
};
pub use outgoing::{BodyMessage, ChatBody};
pub use tools::{WireFunction, WireTool, WireToolCall, WireToolDef};

/// buddy's extension of both APIs' answers (`"buddy": {…}`): why the turn ended and what
/// it did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BuddyDetails {
    pub stop_reason: Option<StopReason>,
    pub model_calls: u32,
    pub tool_calls: u32,
}

impl BuddyDetails {
    /// Why a turn ended (`None` while it runs) and what its stats say it did.
    pub fn of(stop_reason: Option<StopReason>, stats: &TurnStats) -> Self {
        BuddyDetails {
            stop_reason,
            model_calls: stats.model_calls,
            tool_calls: stats.tool_calls,
        }
    }
}
