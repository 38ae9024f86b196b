//! buddy-core: the plain data and traits every other buddy crate speaks.
//!
//! Nothing here does I/O: messages, tool specs, the token stream a provider yields,
//! the events a turn emits, and the `Provider` / `Skill` / `Toolbox` traits the engine
//! drives.

mod arguments;
mod attachment_url;
mod cache;
mod call_budget;
mod clock;
mod cost;
mod elicitation;
mod event;
mod exact_json;
mod head_tail;
mod message;
mod observe;
mod progress;
mod provider;
mod redact;
mod sampling;
mod skill;
mod stop;
mod task_log;
mod token;
mod tool_table;

/// The `User-Agent` buddy's HTTP clients (model servers, MCP servers) send.
pub const USER_AGENT: &str = concat!("buddy/", env!("CARGO_PKG_VERSION"));

pub use arguments::Arguments;
pub use attachment_url::{
    AttachmentUrlError, canonical_image_url, check_file_data, check_image_url,
};
pub use cache::{CacheMark, CacheTtl};
pub use call_budget::CallBudget;
pub use clock::WaitClock;
pub use cost::{InputParts, Price, Usd};
pub use elicitation::{
    ContentError, ElicitationAnswer, ElicitationRequest, Elicitor, answer_with_defaults,
    check_content, check_value, enum_values, form_fields,
};
pub use event::{AgentHop, ChatEvent, Evidence, GuardAction, GuardKind, PendingCall};
pub use exact_json::{json_exact, json_len};
pub use head_tail::head_and_tail;
pub use message::{Attachment, Message, ToolCall, ToolSpec};
pub use observe::{ModelCallEnd, TraceContext, TurnObserver};
pub use progress::{Progress, ProgressSink};
pub use provider::ServedBy;
pub use provider::{
    CallPurpose, Completion, CompletionRequest, Provider, ProviderError, ToolChoice, Wire,
};
pub use redact::{redact_url, redact_urls_in};
pub use sampling::{MAX_STOP_SEQUENCES, ResponseFormat, Sampling};
pub use skill::{
    MessageSink, RecordError, RepeatSemantics, Skill, SkillContext, SkillError, ToolOutcome,
    Toolbox,
};
pub use stop::{DelegatedStats, StopReason, TurnStats};
pub use task_log::{RecordedTask, TaskLog};
pub use token::{FinishReason, ResponseInfo, Token, TokenCount, TokenStream, Usage};
pub use tool_table::{
    DuplicateTool, Keep, LiveTools, ToolEntry, ToolKind, ToolRunner, ToolTable, ToolTableBuilder,
};

/// A boxed, sendable future: the return type of buddy's object-safe async trait methods.
pub type BoxFuture<'a, T> = futures::future::BoxFuture<'a, T>;
