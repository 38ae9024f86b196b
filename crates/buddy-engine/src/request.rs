//! What a turn is asked to do, and what it leaves behind.

use std::collections::HashMap;
use std::sync::Arc;

use buddy_core::{
    CacheMark, Message, MessageSink, Price, RecordedTask, Sampling, StopReason, TaskLog,
    TokenCount, TurnObserver, TurnStats, WaitClock,
};
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalRules, Resume};
use crate::calls::elicitation::ElicitationDesk;
use crate::policy::LoopPolicy;
use crate::tape::{Recording, Tape};

/// Everything one turn needs: the model, the conversation so far, the new user
/// message, the policy, a cancellation token, and where to record messages.
#[derive(Clone)]
pub struct TurnRequest {
    pub model: String,
    /// The conversation before this turn (system prompt, earlier turns).
    pub history: Vec<Message>,
    /// Token counts kept with `history` (by position; a missing or differently made one
    /// is counted again): a stored conversation is not recounted every turn.
    pub history_counts: Vec<Option<TokenCount>>,
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
    /// What the model charges (by default buddy's list price for `model`, if known):
    /// the turn's cost, and what `max_turn_cost_usd` is checked against.
    pub price: Option<Price>,
    /// Watches the turn for tracing (`None`, the default, costs nothing).
    pub observer: Option<Arc<dyn TurnObserver>>,
    /// Sampling and output settings for every model call of the turn (temperature,
    /// structured output, …); the provider refuses what it cannot honour.
    pub sampling: Sampling,
    /// The clock buddy's own waits run on (its checks of a pollable tool); `None`, the
    /// default, is real time. A scripted scenario may bring a simulated one.
    pub clock: Option<Arc<dyn WaitClock>>,
    /// Where a person answers the tools' questions (MCP elicitation) while the turn
    /// runs; `None`, the default, is an unattended turn: the policy answers them.
    pub elicitation: Option<Arc<ElicitationDesk>>,
    /// Tasks that calls left open in `history` became before a restart, by call id:
    /// the turn waits on them again instead of answering the calls as interrupted.
    pub open_tasks: HashMap<String, RecordedTask>,
    /// Where calls that become tasks are recorded (a store); `None`: not recorded.
    pub task_log: Option<Arc<dyn TaskLog>>,
    /// The conversation's prompt-cache key (a client's `prompt_cache_key`); `None`, the
    /// default, is one buddy derives from the conversation's start
    /// ([`crate::conversation_cache_key`]).
    pub cache_key: Option<String>,
    /// Cache breakpoints a client put on `history` messages (by index): kept as placed
    /// in every request that sends the history whole.
    pub cache_marks: Vec<CacheMark>,
    /// The pool of model-call slots the turn's calls (and its sub-agents') take one of
    /// while they stream; `None`: unbounded.
    pub call_slots: Option<crate::CallSlots>,
    /// The operator's price table: a sub-agent or a sampling call on another model than
    /// the turn's is priced from it, as the turn's own model is; `None`: the list prices.
    pub prices: Option<std::sync::Arc<crate::PriceTable>>,
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
            .field("price", &self.price)
            .field("observer", &self.observer.is_some())
            .field("sampling", &self.sampling)
            .field("clock", &self.clock.is_some())
            .field("elicitation", &self.elicitation.is_some())
            .field("open_tasks", &self.open_tasks)
            .field("task_log", &self.task_log.is_some())
            .field("cache_key", &self.cache_key)
            .field("cache_marks", &self.cache_marks)
            .field("call_slots", &self.call_slots)
            .field("prices", &self.prices.is_some())
            .finish()
    }
}

impl TurnRequest {
    /// A turn for `model` answering `user_message`, under the default policy.
    pub fn new(model: impl Into<String>, user_message: impl Into<String>) -> Self {
        let model = model.into();
        TurnRequest {
            price: crate::prices::default_price(&model),
            model,
            history: Vec::new(),
            history_counts: Vec::new(),
            user_message: Some(user_message.into()),
            policy: LoopPolicy::default(),
            cancel: CancellationToken::new(),
            recorder: None,
            approval: ApprovalRules::default(),
            resume: None,
            observer: None,
            sampling: Sampling::default(),
            clock: None,
            elicitation: None,
            open_tasks: HashMap::new(),
            task_log: None,
            cache_key: None,
            cache_marks: Vec::new(),
            call_slots: None,
            prices: None,
        }
    }

    /// The turn's model calls (and its sub-agents') each take one of `slots` while they
    /// stream.
    pub fn with_call_slots(mut self, slots: Option<crate::CallSlots>) -> Self {
        self.call_slots = slots;
        self
    }

    /// Sub-agents and sampling calls on other models are priced from `prices` (the
    /// operator's, in front of the list prices).
    pub fn with_prices(mut self, prices: Option<std::sync::Arc<crate::PriceTable>>) -> Self {
        self.prices = prices;
        self
    }

    /// A request that goes on with the paused or capped turn at the end of `history`.
    pub fn resume(model: impl Into<String>, history: Vec<Message>, resume: Resume) -> Self {
        let mut request = TurnRequest::new(model, String::new()).with_history(history);
        request.user_message = None;
        request.resume = Some(resume);
        request
    }

    /// Lets a person answer the tools' questions through `desk` (attended turn).
    pub fn with_elicitation(mut self, desk: Arc<ElicitationDesk>) -> Self {
        self.elicitation = Some(desk);
        self
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

    /// Sets the token counts kept with the history (as a store gives them back with
    /// [`MessageSink::record_counted`]'s counts): those made the way this model counts
    /// are used instead of counting the message again.
    pub fn with_history_counts(mut self, counts: Vec<Option<TokenCount>>) -> Self {
        self.history_counts = counts;
        self
    }

    /// Sets the policy.
    pub fn with_policy(mut self, policy: LoopPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets what the model charges (`None`: unknown, so the turn has no cost).
    pub fn with_price(mut self, price: Option<Price>) -> Self {
        self.price = price;
        self
    }

    /// Has `observer` watch the turn (a tracer: see `buddy-telemetry`).
    pub fn with_observer(mut self, observer: Arc<dyn TurnObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Sets the sampling and output settings of the turn's model calls.
    pub fn with_sampling(mut self, sampling: Sampling) -> Self {
        self.sampling = sampling;
        self
    }

    /// Has buddy's own waits run on `clock` (`None`: real time).
    pub fn with_clock(mut self, clock: Option<Arc<dyn WaitClock>>) -> Self {
        self.clock = clock;
        self
    }

    /// Records the tasks calls become with `log`, and waits again on `open` (the tasks
    /// of calls `history` leaves open, by call id) instead of answering them as
    /// interrupted.
    pub fn with_tasks(
        mut self,
        log: Option<Arc<dyn TaskLog>>,
        open: HashMap<String, RecordedTask>,
    ) -> Self {
        self.task_log = log;
        self.open_tasks = open;
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
    /// Each message's token count, beside `messages`: the next turn takes them with
    /// [`TurnRequest::with_history_counts`] instead of counting the conversation again.
    pub counts: Vec<Option<TokenCount>>,
    /// Index in `messages` of the first message this turn added (the user message).
    pub first_new: usize,
    /// Everything the turn received from outside, for replay (see [`Tape`]).
    pub tape: Tape,
}

impl TurnOutcome {
    /// The messages this turn added.
    pub fn new_messages(&self) -> &[Message] {
        self.messages.get(self.first_new..).unwrap_or(&[])
    }

    /// The turn as a recording that [`replay`](crate::replay) plays back.
    pub fn recording(&self) -> Recording {
        Recording {
            tape: self.tape.clone(),
            history: self.messages.get(..self.first_new).unwrap_or(&[]).to_vec(),
            new_messages: self.new_messages().to_vec(),
        }
    }
}
