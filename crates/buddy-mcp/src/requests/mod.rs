//! What a server asks of buddy and tells it during a call: elicitation, sampling,
//! progress, roots and tool-list changes, each routed to the call it belongs to.

pub(crate) mod caller;
pub(crate) mod content;
pub(crate) mod elicit;
pub(crate) mod handler;
pub(crate) mod progress;
pub(crate) mod sampling;
