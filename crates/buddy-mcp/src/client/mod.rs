//! The connection to one server: started or reached, restarted after a crash, its
//! tool calls and tasks carried to their end, its resources and prompts listed.

pub(crate) mod augmented;
pub(crate) mod call;
pub(crate) mod catalog;
pub(crate) mod http;
pub(crate) mod result;
mod resume;
pub(crate) mod source;
pub(crate) mod stream_watch;
pub(crate) mod task;
