//! The public face of the engine: build it from a provider and a toolbox, run turns.

use std::sync::Arc;

use buddy_core::{ChatEvent, Message, MessageSink, Provider, StopReason, Toolbox, TurnStats};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalRules, Resume};
use crate::policy::LoopPolicy;
use crate::turn::Turn;

/// Runs agent turns against one provider with one set of tools.
///
/// ```
/// use std::sync::Arc;
/// use buddy_engine::{Engine, TurnRequest};
/// use buddy_providers::{Scenario, ScriptedProvider};
/// use buddy_skills::{Sandbox, SkillRegistry, builtin::{FileLimits, builtin_skills}};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Any `Provider`: here the offline scripted model; see `buddy_providers` for real ones.
/// let script = r#"{"name": "clock", "prompt": "", "rules": [
///     {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "get_time"}]}},
///     {"when": {}, "reply": {"text": "It is {last_result}."}}],
///   "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1}}"#;
/// let provider = Arc::new(ScriptedProvider::new(Arc::new(Scenario::parse(script, "doc")?)));
/// let mut skills = SkillRegistry::new();
/// skills.register_all(builtin_skills(&Sandbox::new(std::env::temp_dir())?, FileLimits::default()))?;
///
/// let engine = Arc::new(Engine::new(provider, Arc::new(skills)));
/// let (mut events, turn) = engine.spawn(TurnRequest::new("scripted", "What time is it?"));
/// while let Some(event) = events.recv().await {
///     println!("{}", serde_json::to_string(&event)?); // stream each ChatEvent anywhere
/// }
/// let outcome = turn.await?;
/// assert_eq!(outcome.reason, buddy_core::StopReason::Completed);
/// assert_eq!(outcome.stats.tool_calls, 1);
/// # Ok(())
/// # }
/// ```
pub struct Engine {
    provider: Arc<dyn Provider>,
    toolbox: Arc<dyn Toolbox>,
}

/// Everything one turn needs: the model, the conversation so far, the new user
/// message, the policy, a cancellation token, and where to record messages.
#[derive(Clone)]
pub struct TurnRequest {
    pub model: String,
    /// The conversation before this turn (system prompt, earlier turns).
    pub history: Vec<Message>,
    /// The user's new message; `None` when `history` already ends with it.
    pub user_message: Option<String>,
    pub policy: LoopPolicy,
    pub cancel: CancellationToken,
    /// Receives each message as it joins the conversation (the user message too).
    pub recorder: Option<Arc<dyn MessageSink>>,
    /// Which calls wait for a person's approval (by default, none).
    pub approval: ApprovalRules,
    /// Goes on with a paused or capped turn instead of a new user message.
    pub resume: Option<Resume>,
}

impl std::fmt::Debug for TurnRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnRequest")
            .field("model", &self.model)
            .field("history", &self.history.len())
            .field("user_message", &self.user_message)
            .field("policy", &self.policy)
            .field("recorder", &self.recorder.is_some())
            .field("approval", &self.approval)
            .field("resume", &self.resume)
            .finish()
    }
}

impl TurnRequest {
    /// A turn for `model` answering `user_message`, under the default policy.
    pub fn new(model: impl Into<String>, user_message: impl Into<String>) -> Self {
        TurnRequest {
            model: model.into(),
            history: Vec::new(),
            user_message: Some(user_message.into()),
            policy: LoopPolicy::default(),
            cancel: CancellationToken::new(),
            recorder: None,
            approval: ApprovalRules::default(),
            resume: None,
        }
    }

    /// A request that goes on with the paused or capped turn at the end of `history`.
    pub fn resume(model: impl Into<String>, history: Vec<Message>, resume: Resume) -> Self {
        let mut request = TurnRequest::new(model, String::new()).with_history(history);
        request.user_message = None;
        request.resume = Some(resume);
        request
    }

    /// Sets which calls wait for approval.
    pub fn with_approval(mut self, approval: ApprovalRules) -> Self {
        self.approval = approval;
        self
    }

    /// Records every new message through `sink`.
    pub fn with_recorder(mut self, sink: Arc<dyn MessageSink>) -> Self {
        self.recorder = Some(sink);
        self
    }

    /// Sets the conversation before this turn.
    pub fn with_history(mut self, history: Vec<Message>) -> Self {
        self.history = history;
        self
    }

    /// Sets the policy.
    pub fn with_policy(mut self, policy: LoopPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets the cancellation token.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }
}

/// How a turn ended and the conversation it left behind.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnOutcome {
    pub reason: StopReason,
    /// The final answer (`Done`), if the turn produced one.
    pub answer: Option<String>,
    /// The error message (`Error`), if the turn ended with one.
    pub error: Option<String>,
    pub stats: TurnStats,
    /// The whole conversation after the turn: always a valid history.
    pub messages: Vec<Message>,
    /// Index in `messages` of the first message this turn added (the user message).
    pub first_new: usize,
}

impl TurnOutcome {
    /// The messages this turn added.
    pub fn new_messages(&self) -> &[Message] {
        self.messages.get(self.first_new..).unwrap_or(&[])
    }
}

/// Room in the event channel of [`Engine::spawn`] before the turn waits for its consumer.
const EVENT_BUFFER: usize = 256;

impl Engine {
    /// An engine over `provider` and `toolbox`.
    pub fn new(provider: Arc<dyn Provider>, toolbox: Arc<dyn Toolbox>) -> Self {
        Engine { provider, toolbox }
    }

    /// Runs one turn, sending its events to `events`; returns when the terminal event is sent.
    pub async fn run(&self, request: TurnRequest, events: mpsc::Sender<ChatEvent>) -> TurnOutcome {
        Turn::new(&*self.provider, &*self.toolbox, request, events)
            .run()
            .await
    }

    /// Runs one turn on its own task; events arrive on the returned receiver.
    pub fn spawn(
        self: &Arc<Self>,
        request: TurnRequest,
    ) -> (
        mpsc::Receiver<ChatEvent>,
        tokio::task::JoinHandle<TurnOutcome>,
    ) {
        let (tx, rx) = mpsc::channel(EVENT_BUFFER);
        let engine = Arc::clone(self);
        let handle = tokio::spawn(async move { engine.run(request, tx).await });
        (rx, handle)
    }

    /// Runs one turn and collects all of its events (for tests, benchmarks and batch use).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use buddy_engine::{Engine, LoopPolicy, TurnRequest};
    /// # use buddy_providers::{Scenario, ScriptedProvider};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let script = r#"{"name": "hi", "prompt": "", "rules": [{"when": {}, "reply": {"text": "Hello!"}}],
    ///   "expect": {"stop_reason": "completed", "model_calls": 1, "tool_calls": 0}}"#;
    /// let provider = Arc::new(ScriptedProvider::new(Arc::new(Scenario::parse(script, "doc")?)));
    /// let engine = Engine::new(provider, Arc::new(buddy_skills::SkillRegistry::new()));
    /// let policy = LoopPolicy { max_model_calls: 5, ..LoopPolicy::default() };
    /// let (events, outcome) = engine.run_collect(TurnRequest::new("m", "Hi").with_policy(policy)).await;
    /// assert_eq!(outcome.answer.as_deref(), Some("Hello!"));
    /// assert!(matches!(events.last(), Some(buddy_core::ChatEvent::Done { .. })));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run_collect(&self, request: TurnRequest) -> (Vec<ChatEvent>, TurnOutcome) {
        let (tx, mut rx) = mpsc::channel(EVENT_BUFFER);
        let collect = async {
            let mut events = Vec::new();
            while let Some(event) = rx.recv().await {
                events.push(event);
            }
            events
        };
        let (outcome, events) = tokio::join!(self.run(request, tx), collect);
        (events, outcome)
    }
}
