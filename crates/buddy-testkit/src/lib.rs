//! Test helpers shared by buddy's crates: providers that replay or record, a
//! programmable toolbox, a loopback HTTP server that plays streams piece by piece,
//! and assertions on event streams and histories.

// Test support: panicking on a broken test setup is the right failure.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod assertions;
mod clock;
mod mock_http;
mod providers;
mod streams;
mod toolbox;
mod transcript;

pub use assertions::{assert_event_order, assert_history_valid};
pub use clock::{NoWait, no_wait};
pub use mock_http::{End, HttpRequest, MockResponse, MockServer, Piece};
pub use providers::{RecordedRequest, RecordingProvider, ReplyProvider, reply_tokens};
pub use streams::{anthropic_sse, openai_sse};
pub use toolbox::{TestTool, TestToolbox};
pub use transcript::transcript;
