//! OpenAI's two APIs as clients send them — Chat Completions and Responses — and their
//! translation to and from buddy's messages. One model for the OpenAI-compatible
//! endpoints of `buddy serve` and for `buddy mock-server`: the content parts, tools and
//! response formats the two APIs share are read by the same code.

mod chat;
pub mod completion;
mod content;
pub mod responses;

use buddy_core::{StopReason, TurnStats};
use serde::Serialize;

pub use chat::{
    ChatCompletionRequest, StreamOptions, WireFunction, WireMessage, WireTool, WireToolCall,
    WireToolDef, to_messages,
};
pub use content::{response_format, text_of, user_content};

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
