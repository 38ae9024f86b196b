//! What a running tool call is served with while the machine waits on it: buddy's own
//! polls of a pollable call (`poll.rs`), its progress as events (`progress.rs`), and a
//! tool's questions for the person (`elicitation.rs`).

pub(crate) mod elicitation;
pub(crate) mod poll;
pub(crate) mod progress;
