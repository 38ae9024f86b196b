//! buddy-engine: the turn state machine and its loop guards.
//!
//! A turn calls the model, runs the tool calls it asks for through a [`Toolbox`],
//! feeds the results back and calls the model again, until the model answers or a
//! limit or loop guard sends the turn to Finalize. Every turn ends with exactly one
//! terminal [`ChatEvent`] and a typed [`StopReason`].
//!
//! [`Toolbox`]: buddy_core::Toolbox
//! [`ChatEvent`]: buddy_core::ChatEvent
//! [`StopReason`]: buddy_core::StopReason

mod approval;
mod ceiling;
pub mod context;
mod emitter;
mod engine;
mod finalize;
mod glob;
pub mod guards;
mod history_check;
mod model_call;
mod policy;
mod tool_round;
mod turn;

pub use approval::{ApprovalMode, ApprovalRules, CallDecision, Decision, Resume};
pub use ceiling::Raised;
pub use engine::{Engine, TurnOutcome, TurnRequest};
pub use glob::glob_match;
pub use history_check::{HistoryError, check_history};
pub use policy::{LoopPolicy, OnLimit, PolicyConfig, PolicyError, PolicyPatch};
pub use tokio_util::sync::CancellationToken;
