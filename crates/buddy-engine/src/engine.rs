//! The public face of the engine: build it from a provider and a toolbox, run turns.

use std::sync::Arc;

use buddy_core::{ChatEvent, Provider, Toolbox};
use tokio::sync::mpsc;

use crate::machine::Turn;
use crate::request::{TurnOutcome, TurnRequest};
use crate::turn_events::TurnEvents;

/// Runs agent turns against one provider with one set of tools.
///
/// ```
/// use std::sync::Arc;
/// use buddy_engine::{Engine, TurnRequest};
/// use buddy_scripted::{Scenario, ScriptedProvider};
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

/// Room in the event channel of [`Engine::spawn`] before the turn waits for its consumer.
const EVENT_BUFFER: usize = 256;

impl Engine {
    /// An engine over `provider` and `toolbox`.
    pub fn new(provider: Arc<dyn Provider>, toolbox: Arc<dyn Toolbox>) -> Self {
        Engine { provider, toolbox }
    }

    /// Runs one turn, sending its events to `events`; returns when the terminal event is sent.
    pub async fn run(&self, request: TurnRequest, events: mpsc::Sender<ChatEvent>) -> TurnOutcome {
        let lease = crate::budget::Lease::root(&request.policy);
        let (turn, entry) = Turn::new(&*self.provider, &*self.toolbox, request, lease, events);
        turn.run(entry).await
    }

    /// Runs a sub-agent's turn under `lease`, its share of the calling turn's tree.
    pub(crate) async fn run_leased(
        &self,
        request: TurnRequest,
        lease: crate::budget::Lease,
        events: mpsc::Sender<ChatEvent>,
    ) -> TurnOutcome {
        let (turn, entry) = Turn::new(&*self.provider, &*self.toolbox, request, lease, events);
        turn.run(entry).await
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

    /// Runs one turn as the stream of its events, on the task that reads them (no task of
    /// its own): the same events as [`Engine::spawn`] with one wake-up fewer per event;
    /// `outcome()` after the stream ends says how the turn ended.
    pub fn events(self: &Arc<Self>, request: TurnRequest) -> TurnEvents {
        let (tx, rx) = mpsc::channel(EVENT_BUFFER);
        let engine = Arc::clone(self);
        TurnEvents::new(Box::pin(async move { engine.run(request, tx).await }), rx)
    }

    /// Runs one turn and collects all of its events (for tests, benchmarks and batch use).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use buddy_engine::{Engine, LoopPolicy, TurnRequest};
    /// # use buddy_scripted::{Scenario, ScriptedProvider};
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
