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

mod agents;
mod approval;
mod budget;
mod cache_key;
mod call_ledger;
mod call_slots;
mod calls;
pub mod context;
mod deadline;
mod emitter;
mod engine;
mod glob;
pub mod guards;
mod history_check;
mod judge;
mod ledger;
mod machine;
mod model_call;
mod policy;
mod prices;
mod replay;
mod request;
mod tape;
mod turn_events;
mod words;

pub use agents::{
    AgentOutcome, AgentSet, AgentSkill, AgentSpec, AgentSpecError, AgentStatus, MAX_HISTORY,
    attach_agents,
};
pub use approval::{ApprovalMode, ApprovalRules, CallDecision, Decision, Resume};
pub use cache_key::conversation_cache_key;
pub use call_ledger::{CallLedger, CallWorst, Reserved};
pub use call_slots::CallSlots;
pub use calls::elicitation::{AnswerError, ElicitationDesk};
pub use engine::Engine;
pub use glob::glob_match;
pub use history_check::{HistoryError, check_history};
pub use ledger::calls_left_open;
pub use policy::{
    Ceiling, Check, Field, Flag, LoopPolicy, OnLimit, POLICY_FIELDS, PolicyConfig, PolicyError,
    PolicyPatch, Raised, UnattendedElicitation,
};
pub use prices::{PriceTable, default_price};
pub use replay::{
    Beyond, Comparison, Intervention, JudgeError, LONG_LOOP_REPEATS, LOOP_REPEATS,
    LoggedConversation, LoggedTurn, NO_RESULT, Outcome, Repairs, Repeats, RunJudgement, Side,
    StopPoint, StoppedBy, TapeError, TripAt, Wanted, judge_conversation, replay, transcript,
    turns_of,
};
pub use request::{TurnOutcome, TurnRequest};
pub use tape::{
    Interruption, Recording, TAPE_VERSION, Tape, TapeCalls, TapeEnd, TapeEntry, TapeStep, TapeTool,
};
pub use tokio_util::sync::CancellationToken;
pub use turn_events::TurnEvents;
