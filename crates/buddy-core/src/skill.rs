use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{BoxFuture, Message, TokenCount, ToolCall, ToolSpec};

/// What repeating a call with the same arguments means for a skill; the loop guards
/// read it to tell a loop from legitimate polling.
///
/// The default, `Observed`, needs no declaration: a repeat is run, and only a result
/// that came back unchanged counts as a loop signal (a changed result is progress).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepeatSemantics {
    /// Undeclared: a repeat runs and is judged by its result (unchanged = loop signal).
    #[default]
    Observed,
    /// Same arguments, same answer within a turn: a repeat is answered from the earlier
    /// result without running, and is a loop signal.
    Pure,
    /// A repeat that returns a new result is progress (job status, queues).
    Pollable,
    /// Has side effects: never silently re-run with the same arguments.
    Effectful,
}

/// Per-call information handed to a skill.
#[derive(Clone, Debug, Default)]
pub struct SkillContext {
    /// The id of the tool call being executed.
    pub call_id: String,
    /// The call's arguments as the model sent them: the JSON text the `args` of
    /// [`Skill::execute`] were parsed from (set by the registry). A skill that passes its
    /// arguments on as text (a command's stdin) sends these instead of encoding `args`
    /// again.
    pub arguments: crate::Arguments,
    /// The W3C `traceparent` of the call's span when tracing is on: a skill that calls
    /// another service (MCP's `params._meta`) sends it on.
    pub traceparent: Option<String>,
    /// Asks the person for values mid-call (an MCP server's elicitation), pausing the
    /// turn like an approval; `None` (a bare context) is answered `decline` by the caller.
    pub elicitor: Option<Arc<dyn crate::Elicitor>>,
    /// Where the call reports its progress while it runs (`tool_progress` events);
    /// `None`: nobody follows it.
    pub progress: Option<Arc<dyn crate::ProgressSink>>,
    /// The turn's budget, for model calls the tool makes on its server's behalf (MCP
    /// sampling); `None`: they are not counted.
    pub budget: Option<Arc<dyn crate::CallBudget>>,
    /// Where a call that becomes a task on its server (MCP Tasks) records it, so a turn
    /// after a restart can wait on it again; `None`: not recorded.
    pub tasks: Option<Arc<dyn crate::TaskLog>>,
}

/// A skill's failure. `Failed` becomes an error tool result the model sees and can
/// react to; `Fatal` ends the turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    #[error("{0}")]
    Failed(String),
    #[error("fatal skill error: {0}")]
    Fatal(String),
}

/// A tool the model can call. Arguments arrive already validated against `parameters()`.
///
/// `execute` returns a boxed future, so its body is `Box::pin(async move { … })`. A
/// `SkillError::Failed` is a result the model reads and can react to.
///
/// ```
/// use buddy_core::{BoxFuture, Skill, SkillContext, SkillError};
/// use serde_json::{Value, json};
///
/// struct Shout;
///
/// impl Skill for Shout {
///     fn name(&self) -> &str { "shout" }
///     fn description(&self) -> &str { "Upper-cases a text." }
///     fn parameters(&self) -> Value {
///         json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
///     }
///     fn execute<'a>(&'a self, args: Value, _ctx: SkillContext) -> BoxFuture<'a, Result<String, SkillError>> {
///         Box::pin(async move {
///             let text = args["text"].as_str().ok_or_else(|| SkillError::Failed("`text` must be a string".into()))?;
///             Ok(text.to_uppercase())
///         })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let result = Shout.execute(json!({"text": "hi"}), SkillContext::default()).await;
/// assert_eq!(result, Ok("HI".to_owned()));
/// # }
/// ```
pub trait Skill: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// What it does, for the model.
    fn description(&self) -> &str;
    /// JSON Schema of its arguments.
    fn parameters(&self) -> serde_json::Value;
    /// How repeats with the same arguments are to be read.
    fn semantics(&self) -> RepeatSemantics {
        RepeatSemantics::Observed
    }
    /// How long one call may take; `None` uses the registry's default.
    fn timeout(&self) -> Option<Duration> {
        None
    }
    /// True for a sub-agent: a skill that runs a whole turn of its own under the calling
    /// turn's budget (the engine runs its call inside the calling turn's scope).
    fn is_agent(&self) -> bool {
        false
    }
    /// Runs the skill. Cancellation is by dropping the future.
    fn execute<'a>(
        &'a self,
        args: serde_json::Value,
        ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>>;

    /// The spec offered to the model.
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_owned(),
            description: self.description().to_owned(),
            parameters: self.parameters(),
        }
    }
}

impl<S: Skill + ?Sized> Skill for Arc<S> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn description(&self) -> &str {
        (**self).description()
    }
    fn parameters(&self) -> serde_json::Value {
        (**self).parameters()
    }
    fn semantics(&self) -> RepeatSemantics {
        (**self).semantics()
    }
    fn timeout(&self) -> Option<Duration> {
        (**self).timeout()
    }
    fn is_agent(&self) -> bool {
        (**self).is_agent()
    }
    fn execute<'a>(
        &'a self,
        args: serde_json::Value,
        ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        (**self).execute(args, ctx)
    }
}

/// What one tool call produced, ready for the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutcome {
    pub content: String,
    pub is_error: bool,
    /// A fatal skill error: the turn must end.
    pub fatal: bool,
}

impl ToolOutcome {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutcome {
            content: content.into(),
            is_error: false,
            fatal: false,
        }
    }

    /// An error result the model sees.
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutcome {
            content: content.into(),
            is_error: true,
            fatal: false,
        }
    }
}

/// The set of tools a turn can use: the engine's only view of skills.
///
/// `invoke` never fails: unknown tools, malformed or invalid arguments, timeouts and
/// skill errors all come back as error outcomes the model sees.
pub trait Toolbox: Send + Sync {
    /// Every tool on offer, in a stable order.
    fn specs(&self) -> &[ToolSpec];
    /// The repeat semantics of `name`, or `None` for an unknown tool.
    fn semantics(&self, name: &str) -> Option<RepeatSemantics>;
    /// Validates and runs one call.
    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome>;
    /// Waits again on `task`, the task `call` became before a restart, and gives the
    /// call's outcome; `None` (the default): this toolbox cannot, and the call is
    /// answered as interrupted.
    fn resume<'a>(
        &'a self,
        _call: &'a ToolCall,
        _task: &'a crate::RecordedTask,
        _ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        None
    }
    /// True for a tool the caller runs itself (an OpenAI client's own tools): a call to it
    /// pauses the turn and goes back to the caller instead of being executed.
    fn is_external(&self, _name: &str) -> bool {
        false
    }
    /// True for a tool that is a sub-agent ([`Skill::is_agent`]).
    fn is_agent(&self, _name: &str) -> bool {
        false
    }
    /// For a toolbox whose tools can change while it is in use (an MCP server's
    /// `notifications/tools/list_changed`): a generation number, bumped on every change,
    /// and the toolbox to use now. The engine asks before every model call and switches
    /// when the generation moved. `None` (the default): the tools never change.
    fn latest(&self) -> BoxFuture<'_, Option<(u64, Arc<dyn Toolbox>)>> {
        Box::pin(async { None })
    }
    /// This toolbox as a [`crate::ToolTable`], when it is one: a table built over it
    /// takes its entries as they are instead of going through it.
    fn as_table(&self) -> Option<&crate::ToolTable> {
        None
    }
}

/// Receives every message the moment it joins a conversation, so a store can keep it.
pub trait MessageSink: Send + Sync {
    /// Records `message`; the engine waits for it before going on. An error ends the
    /// turn with `store_error`: a turn whose messages are not kept must not go on.
    fn record<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Result<(), RecordError>>;
    /// Records `message` with its token count, which a store may keep so the
    /// conversation is not counted again next turn. By default the count is dropped.
    fn record_counted<'a>(
        &'a self,
        message: &'a Message,
        count: TokenCount,
    ) -> BoxFuture<'a, Result<(), RecordError>> {
        let _ = count;
        self.record(message)
    }
}

/// Messages of a turn could not be kept; the message says what failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RecordError(pub String);

impl<T: Toolbox + ?Sized> Toolbox for Arc<T> {
    fn specs(&self) -> &[ToolSpec] {
        (**self).specs()
    }
    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        (**self).semantics(name)
    }
    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        (**self).invoke(call, ctx)
    }
    fn is_external(&self, name: &str) -> bool {
        (**self).is_external(name)
    }
    fn is_agent(&self, name: &str) -> bool {
        (**self).is_agent(name)
    }
    fn latest(&self) -> BoxFuture<'_, Option<(u64, Arc<dyn Toolbox>)>> {
        (**self).latest()
    }
    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        task: &'a crate::RecordedTask,
        ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        (**self).resume(call, task, ctx)
    }
    fn as_table(&self) -> Option<&crate::ToolTable> {
        (**self).as_table()
    }
}
