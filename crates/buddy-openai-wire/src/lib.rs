//! OpenAI's two APIs on the wire — Chat Completions and Responses — and their
//! translation to and from buddy's messages, typed once: read from clients by the
//! OpenAI-compatible endpoints of `buddy serve` and by `buddy mock-server`, written to
//! providers by buddy's OpenAI client ([`ChatBody`]). Tool calls, tool definitions,
//! content parts and response formats are the same types and code on both sides.

mod chat;
pub mod client_tools;
pub mod completion;
mod content;
mod details;
mod outgoing;
pub mod responses;
mod tools;

pub use chat::{ChatCompletionRequest, StreamOptions, WireMessage, to_messages};
pub use content::{
    response_format, response_format_value, text_of, user_content, user_content_value,
};
pub use details::BuddyDetails;
pub use outgoing::{BodyMessage, ChatBody};
pub use tools::{WireFunction, WireTool, WireToolCall, WireToolDef};
