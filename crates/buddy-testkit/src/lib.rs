//! Test helpers shared by buddy's crates: providers that replay or record, a
//! programmable toolbox, and assertions on event streams and histories.

mod assertions;
mod providers;
mod toolbox;
mod transcript;

pub use assertions::{assert_event_order, assert_history_valid};
pub use providers::{RecordedRequest, RecordingProvider, ReplyProvider, reply_tokens};
pub use toolbox::{TestTool, TestToolbox};
pub use transcript::transcript;
