//! The turn as an explicit state machine, and the driver that moves it.
//!
//! ```text
//!            Start(entry) ── Interrupted(then): close calls left open by a crash ──> Start(then)
//!                 │ NewMessage / Continue / ClientResults             │ Decisions
//!                 v                                                   v
//!   ┌────────> CallModel ──reply──> Route ──calls──> ExecuteTools ────┘
//!   │             ^  (no answer in the reply: asked again) │
//!   │             │  limit, deadline   │  approval / client tools       │ guard verdict
//!   │             v                    v                                v
//!   │         Finalize ──────────> End(answered | failed | cancelled)  Finalize
//!   │                                  ^                ^
//!   │        Wait(approval | client) ──┘ (paused)       │ answer, finish, chant
//!   └───────────── ExecuteTools: continue ──────────────┘
//! ```
//!
//! Each step is one method (in `start.rs`, `call.rs`, `route.rs`, `tools.rs`,
//! `finalize.rs`, `end.rs`) that does the step's I/O — a model call, tool calls, events,
//! messages — asks the judge what it means (only through `judge::Judge`), and returns the
//! next state. Every turn passes through `End` exactly once, which emits the one terminal
//! event. A model call's parts: the tools it offers (`offer.rs`), its request sized,
//! fitted and checked (`request.rs`, by `context::budget`), and its account (`account.rs`).

mod account;
mod call;
mod end;
mod finalize;
mod offer;
mod request;
mod resume_task;
mod route;
mod start;
mod tools;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use buddy_core::{
    CallPurpose, ChatEvent, Message, PendingCall, Price, Provider, StopReason, ToolCall, Toolbox,
    TurnStats, Usd,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::approval::{ApprovalRules, CallDecision, Decision, Resume};
use crate::budget::Lease;
use crate::context::budget::Room;
use crate::context::counter_for_model;
use crate::emitter::Emitter;
use crate::judge::{FinalizeCause, Judge, Trip};
use crate::ledger::Ledger;
use crate::model_call::Reply;
use crate::request::{TurnOutcome, TurnRequest};
use crate::tape::{Tape, TapeEntry, TapeStep};

/// Where a turn is.
pub(crate) enum State {
    /// The turn begins, from one of its entries.
    Start(Entry),
    /// Call the model with the tools on offer (after the limits are checked): for a round
    /// of the turn, or to ask again for an answer a reply did not hold.
    CallModel(CallPurpose),
    /// Decide from the model's reply where the turn goes.
    Route(Reply),
    /// Run one reply's tool calls through the judge.
    ExecuteTools(Round),
    /// A limit or guard ended tool use: one last call without tools, then the end.
    Finalize(FinalizeCause),
    /// The turn pauses until someone outside answers.
    Wait(Wait),
    /// The turn is over.
    End(End),
}

/// How a turn begins.
pub(crate) enum Entry {
    /// A user message (given, or already the history's last message).
    NewMessage { user: Option<String> },
    /// A person decided about the calls the paused turn waits for.
    Decisions(Vec<CallDecision>),
    /// A capped turn goes on with a fresh budget.
    Continue,
    /// The client ran its tools and sent their results back (no new user message).
    ClientResults,
    /// The history ends with calls a crash left open: they are answered as interrupted,
    /// then the turn begins as `then`.
    Interrupted(Box<Entry>),
}

/// One reply's calls on their way through the judge.
pub(crate) struct Round {
    pub text: String,
    pub calls: Vec<ToolCall>,
    /// A person's decisions about these calls (a resumed round), by call id.
    pub decided: HashMap<String, Decision>,
    /// Notes for the model sent with this round's results.
    pub notes: Vec<String>,
    /// Finalize after the round even if it finds nothing (earlier rounds already did).
    pub then: Option<FinalizeCause>,
}

/// What a paused turn waits for.
pub(crate) enum Wait {
    /// A person's approval of `waiting` (none of the reply's calls has run).
    Approval {
        text: String,
        calls: Vec<ToolCall>,
        /// The calls as the model sent them, when buddy changed them (ids, count).
        raw: Option<Vec<ToolCall>>,
        waiting: Vec<PendingCall>,
        tape_step: usize,
    },
    /// The client to run its tools.
    Client {
        text: String,
        calls: Vec<ToolCall>,
        raw: Option<Vec<ToolCall>>,
        tape_step: usize,
    },
}

/// How a turn ends.
pub(crate) enum End {
    /// With an answer; an empty one is written by buddy from the tool results.
    Answered { reason: StopReason, text: String },
    /// With an error and no answer.
    Failed { reason: StopReason, message: String },
    /// The caller cancelled it.
    Cancelled,
    /// Paused, waiting (`approval_required`, `client_tool_calls`), with the reply's text.
    Paused { reason: StopReason, text: String },
}

/// The toolbox of a turn: the engine's own, or the latest generation of one whose tools
/// change (MCP list changes).
pub(crate) enum ToolboxHandle<'e> {
    Base(&'e dyn Toolbox),
    Live(Arc<dyn Toolbox>),
}

impl<'e> std::ops::Deref for ToolboxHandle<'e> {
    type Target = dyn Toolbox + 'e;

    fn deref(&self) -> &Self::Target {
        match self {
            ToolboxHandle::Base(toolbox) => *toolbox,
            ToolboxHandle::Live(toolbox) => &**toolbox,
        }
    }
}

/// What the driver knows of the model's context window.
struct Window {
    /// The model's context window, the part of it kept for the reply, and the lower
    /// ceiling set when the provider refused a request as too long.
    room: Room,
    /// Tokens of the latest tool list, by names, and whether they are exact (else a bound).
    tools_cache: Option<(Vec<String>, usize, bool)>,
    /// Estimated tokens of the latest request sent.
    last_sent_tokens: u64,
    /// The latest request was sized by upper bounds (its exact size is made if the
    /// provider refuses it as too long).
    last_sent_bounded: bool,
    /// Messages before this index were trimmed out of the latest request and stay out of
    /// the next ones (trimming in large steps keeps the prefix for the prompt cache).
    trim_floor: usize,
}

/// The driver of one turn. Owned by a single task; nothing here is shared or locked.
pub(crate) struct Turn<'e> {
    provider: &'e dyn Provider,
    /// The toolbox the engine was built with.
    base_toolbox: &'e dyn Toolbox,
    /// The toolbox's latest generation, when its tools can change (MCP list changes).
    live: Option<(u64, Arc<dyn Toolbox>)>,
    model: String,
    events: Emitter,
    cancel: CancellationToken,
    started: Instant,
    deadline: Option<Instant>,
    stats: TurnStats,
    /// What the model charges, if known.
    price: Option<Price>,
    /// The slots model calls take while they stream (a key's pool), if bounded.
    call_slots: Option<crate::CallSlots>,
    /// The operator's price table, for sub-agents and sampling calls on other models.
    prices: Option<Arc<crate::PriceTable>>,
    /// The client's sampling and output settings, sent with every model call.
    sampling: buddy_core::Sampling,
    /// What the latest model call cost: the estimate of the next one.
    last_call_cost: Option<Usd>,
    judge: Judge,
    ledger: Ledger,
    window: Window,
    approval: ApprovalRules,
    /// Whether the current model call offered tools.
    tools_offered_now: bool,
    /// Requests leave out tool rounds that repeat earlier ones (the model server refused them).
    prune_repeats: bool,
    /// The answer so far when replies cut by the output limit were asked to go on (the
    /// history already holds it; the answer is it and the rest).
    cut_answer: String,
    /// The text a model call had streamed when the turn was cancelled: kept as the
    /// turn's last (partial) assistant message.
    partial_reply: String,
    tape: Tape,
    /// The clock buddy's own waits run on (`None`: real time).
    clock: Option<Arc<dyn buddy_core::WaitClock>>,
    /// How the turn's tool calls ask the person (MCP elicitation).
    elicitation: crate::calls::elicitation::TurnElicitation,
    /// The turn's share of its tree of agents: the whole tree's ledger for a top-level
    /// turn, a lease carved from the caller's for a sub-agent.
    lease: Lease,
    /// Model calls the turn's tools made for their MCP servers (sampling), drawn from
    /// the lease's pool and not yet in `stats`.
    side_usage: crate::budget::SideUsage,
    /// Tasks calls left open in the history became before a restart, by call id.
    open_tasks: std::collections::HashMap<String, buddy_core::RecordedTask>,
    /// Where calls that become tasks are recorded.
    task_log: Option<Arc<dyn buddy_core::TaskLog>>,
    /// The conversation's prompt-cache key, sent with every model call.
    cache_key: String,
    /// A client's cache breakpoints on the history, by message index.
    cache_marks: Vec<buddy_core::CacheMark>,
}

impl<'e> Turn<'e> {
    /// A turn over `request` holding `lease` on its tree, and the entry it begins with.
    pub(crate) fn new(
        provider: &'e dyn Provider,
        toolbox: &'e dyn Toolbox,
        request: TurnRequest,
        lease: Lease,
        events: mpsc::Sender<ChatEvent>,
    ) -> (Self, Entry) {
        let started = Instant::now();
        let policy = request.policy;
        let deadline = policy
            .deadline_ms
            .map(|ms| started + Duration::from_millis(ms));
        let window = policy
            .context_window
            .unwrap_or_else(|| crate::context::default_window(&request.model));
        let reserve = policy
            .reserve_output_tokens
            .unwrap_or_else(|| crate::context::default_reserve(window));
        let given = request.history.len();
        let cache_key = request.cache_key.clone().unwrap_or_else(|| {
            crate::conversation_cache_key(&request.history, request.user_message.as_deref())
        });
        let ends_with_user = matches!(request.history.last(), Some(Message::User { .. }));
        let ledger = Ledger::new(
            request.history,
            &request.history_counts,
            counter_for_model(&request.model),
            request.recorder,
        );
        let left_open = !ledger.interrupted_calls().is_empty();
        let (entry, tape_entry) = match request.resume {
            Some(Resume::Decisions(decisions)) => (
                Entry::Decisions(decisions.clone()),
                TapeEntry::Decisions { decisions },
            ),
            Some(Resume::Continue) => (Entry::Continue, TapeEntry::Continue),
            None if request.user_message.is_some() || ends_with_user => (
                Entry::NewMessage {
                    user: request.user_message,
                },
                TapeEntry::NewMessage { user_at: None },
            ),
            None => (Entry::ClientResults, TapeEntry::ClientResults),
        };
        let entry = match entry {
            Entry::Decisions(_) => entry,
            _ if left_open => Entry::Interrupted(Box::new(entry)),
            _ => entry,
        };
        let mut tape = Tape::new(
            &request.model,
            &policy,
            &request.approval,
            tape_entry,
            given,
        );
        tape.tools = crate::tape::tools_of(toolbox);
        let elicitation = crate::calls::elicitation::TurnElicitation::new(
            request.elicitation,
            events.clone(),
            request.cancel.clone(),
            deadline,
            &policy,
        );
        let turn = Turn {
            cache_key,
            cache_marks: request.cache_marks,
            open_tasks: request.open_tasks,
            task_log: request.task_log,
            side_usage: crate::budget::SideUsage::default(),
            elicitation,
            provider,
            base_toolbox: toolbox,
            live: None,
            model: request.model,
            events: Emitter::new(events, request.observer),
            cancel: request.cancel,
            started,
            deadline,
            stats: TurnStats::default(),
            price: request.price,
            call_slots: request.call_slots,
            prices: request.prices,
            sampling: request.sampling,
            clock: request.clock,
            last_call_cost: None,
            judge: Judge::new(policy),
            ledger,
            window: Window {
                room: Room {
                    window,
                    reserve,
                    cap: None,
                },
                tools_cache: None,
                last_sent_tokens: 0,
                last_sent_bounded: false,
                trim_floor: 0,
            },
            approval: request.approval,
            tools_offered_now: false,
            prune_repeats: false,
            cut_answer: String::new(),
            partial_reply: String::new(),
            tape,
            lease,
        };
        (turn, entry)
    }

    /// Runs the state machine from `entry` to its one terminal event.
    pub(crate) async fn run(mut self, entry: Entry) -> TurnOutcome {
        let refused = self
            .sampling
            .validate()
            .err()
            .or_else(|| self.provider.unsupported(&self.sampling))
            .or_else(|| self.provider.refuses_any(self.ledger.messages()));
        let mut state = match (self.judge.policy().max_turn_cost_usd, self.price) {
            // A setting or an attachment the model cannot take is refused, never dropped.
            _ if refused.is_some() => State::End(End::Failed {
                reason: StopReason::InvalidRequest,
                message: refused.unwrap_or_default(),
            }),
            // A money budget that cannot be checked is refused, never ignored.
            (Some(budget), None) => State::End(End::Failed {
                reason: StopReason::InvalidRequest,
                message: format!(
                    "max_turn_cost_usd = {budget} cannot be kept: buddy knows no price for \
                     model `{}`; set one under `prices` of its provider in buddy.toml, or \
                     drop the budget",
                    self.model
                ),
            }),
            _ => State::Start(entry),
        };
        loop {
            state = match state {
                State::Start(entry) => self.start(entry).await,
                State::CallModel(purpose) => self.call_model(purpose).await,
                State::Route(reply) => self.route(reply).await,
                State::ExecuteTools(round) => self.execute_tools(round).await,
                State::Finalize(cause) => self.finalize(cause).await,
                State::Wait(wait) => self.wait(wait).await,
                State::End(end) => return self.end(end).await,
            };
        }
    }

    /// The toolbox calls go to: its latest generation when its tools can change.
    fn toolbox(&self) -> &dyn Toolbox {
        match &self.live {
            Some((_, toolbox)) => &**toolbox,
            None => self.base_toolbox,
        }
    }

    /// The toolbox calls go to, held apart from the turn (for work that also changes
    /// the turn, such as running calls while recording their results).
    fn toolbox_handle(&self) -> ToolboxHandle<'e> {
        match &self.live {
            Some((_, toolbox)) => ToolboxHandle::Live(Arc::clone(toolbox)),
            None => ToolboxHandle::Base(self.base_toolbox),
        }
    }

    /// The names of every tool of the toolbox.
    fn tool_names(&self) -> Vec<String> {
        self.toolbox()
            .specs()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// Announces what a guard did (a `guard_tripped` event) and puts it on the tape.
    async fn announce(&mut self, trip: Trip) {
        announce_to(&self.events, &mut self.tape, self.stats.model_calls, trip).await;
    }

    /// Announces each trip, in order.
    async fn announce_all(&mut self, trips: Vec<Trip>) {
        for trip in trips {
            self.announce(trip).await;
        }
    }

    /// Announces a tool call the engine is about to run or answer.
    async fn emit_call_start(&self, call: &ToolCall) {
        self.events
            .emit(ChatEvent::ToolCallStart {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            })
            .await;
    }

    /// What the next model call will cost, about, when a money budget asks: the last
    /// call's cost, or before any call the history's input tokens (counted exactly) at
    /// the model's price (a lower bound: no output).
    fn next_call_estimate(&mut self) -> Option<Usd> {
        self.judge.policy().max_turn_cost_usd?;
        if let Some(cost) = self.last_call_cost {
            return Some(cost);
        }
        let price = self.price?;
        self.ledger.count_exactly();
        Some(price.estimate(u64::try_from(self.ledger.tokens()).unwrap_or(u64::MAX), 0))
    }

    /// Milliseconds since the turn started.
    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// True once the turn's deadline has passed.
    fn deadline_passed(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The end a turn comes to before its next model call, if it is cancelled or a
    /// message could not be stored (a turn whose messages are not kept must not go on).
    fn stopped_before_call(&mut self) -> Option<End> {
        if self.cancel.is_cancelled() {
            return Some(End::Cancelled);
        }
        self.ledger.take_record_failure().map(store_failed)
    }
}

/// Announces what a guard did (a `guard_tripped` event) and puts it on `tape`; a free
/// function so a step can announce while it holds a borrow of the history.
async fn announce_to(events: &Emitter, tape: &mut Tape, model_call: u32, trip: Trip) {
    let Trip {
        guard,
        action,
        skill,
        detail,
        evidence,
    } = trip;
    debug!(guard = guard.as_str(), action = action.as_str(), skill, %detail, evidence = evidence.len(), "guard tripped");
    tape.steps.push(TapeStep::Trip {
        guard,
        action,
        skill: skill.clone(),
        model_call,
        detail: detail.clone(),
        evidence: evidence.clone(),
    });
    events
        .emit(ChatEvent::GuardTripped {
            guard,
            action,
            skill,
            detail,
            evidence,
        })
        .await;
}

/// The end of a turn whose messages could not be stored.
fn store_failed(failure: String) -> End {
    End::Failed {
        reason: StopReason::StoreError,
        message: format!(
            "the conversation could not be stored ({failure}); the turn was stopped and its \
             unstored messages dropped. Check the server's store, then send the message again"
        ),
    }
}

/// `text`, unless it is blank.
fn non_empty(text: String) -> Option<String> {
    (!text.trim().is_empty()).then_some(text)
}
