//! The turn state machine: CallModel -> (Done | ExecuteTools -> CallModel | Finalize -> Done).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use buddy_core::{
    ChatEvent, CompletionRequest, Evidence, FinishReason, GuardAction, GuardKind, Message,
    MessageSink, Provider, StopReason, ToolChoice, ToolSpec, Toolbox, TurnStats, Usage,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::approval::{ApprovalRules, Decision, Resume};
use crate::context::{
    Overflow, TokenCounter, counter_for_model, default_reserve, default_window, fit,
};
use crate::emitter::Emitter;
use crate::engine::{TurnOutcome, TurnRequest};
use crate::finalize::{fallback_answer, finish_tool_spec, has_successful_results};
use crate::guards::call_log::CallLog;
use crate::guards::chant::ChantDetector;
use crate::guards::ladder::Ladder;
use crate::history_check::{HistoryError, check_history};
use crate::model_call::{CallEnd, Reply, stream_reply};
use crate::policy::{LoopPolicy, OnLimit};

/// Why the turn goes to Finalize, and the guard to name in the event.
#[derive(Clone, Debug)]
pub(crate) struct FinalizeCause {
    pub reason: StopReason,
    pub guard: GuardKind,
    pub detail: String,
    /// The calls that made the guard act, for the event.
    pub evidence: Vec<Evidence>,
}

impl FinalizeCause {
    /// A cause with no call evidence (limits, deadlines).
    pub(crate) fn new(reason: StopReason, guard: GuardKind, detail: String) -> Self {
        FinalizeCause {
            reason,
            guard,
            detail,
            evidence: Vec::new(),
        }
    }

    /// The same cause, naming the calls that made the guard act.
    pub(crate) fn with_evidence(mut self, evidence: Vec<Evidence>) -> Self {
        self.evidence = evidence;
        self
    }
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

/// Where the state machine goes after a step.
pub(crate) enum Step {
    Continue,
    Finalize(FinalizeCause),
    Done(TurnOutcome),
}

/// What the guards remember across the rounds of one turn.
#[derive(Default)]
pub(crate) struct GuardState {
    /// Withdrawn skills: why, in words the model reads, and the guard that did it.
    pub withdrawn: BTreeMap<String, (String, GuardKind)>,
    /// The guard behind the latest withdrawal, named again if it leaves no tools.
    pub last_withdrawal_by: Option<GuardKind>,
    pub calls_per_skill: HashMap<String, u32>,
    pub consecutive_failures: HashMap<String, u32>,
    pub log: CallLog,
    pub ladder: Ladder,
    /// Normalised answer texts of earlier rounds that came with tool calls.
    pub answers: Vec<String>,
    pub tools_withdrawn_announced: bool,
    /// Tool rounds so far (model responses whose calls were run).
    pub rounds: u32,
    /// Call keys the model was already warned about: repeating one again finalizes.
    pub signalled: HashSet<String>,
    /// Skills that tripped a guard in this turn (trips on several add up).
    pub tripped_skills: BTreeSet<String>,
    /// Per skill: calls in a row whose arguments changed but whose result did not.
    pub echo_streak: HashMap<String, u32>,
    /// Rounds in a row in which every call only repeated an earlier one.
    pub stale_rounds: u32,
    /// Calls dropped from the latest reply for going over `max_calls_per_reply`.
    pub dropped_calls: Option<usize>,
}

/// One turn in progress. Owned by a single task; nothing here is shared or locked.
pub(crate) struct Turn<'e> {
    pub provider: &'e dyn Provider,
    /// The toolbox the engine was built with.
    base_toolbox: &'e dyn Toolbox,
    /// The toolbox's latest generation, when its tools can change (MCP list changes).
    live: Option<(u64, Arc<dyn Toolbox>)>,
    pub model: String,
    pub policy: LoopPolicy,
    pub cancel: CancellationToken,
    pub events: Emitter,
    pub started: Instant,
    pub deadline: Option<Instant>,
    pub stats: TurnStats,
    pub history: Vec<Message>,
    pub first_new: usize,
    /// Where this turn's own rounds start: `first_new`, or earlier for a turn resumed
    /// after client-run tools (their rounds are part of it). Answers quote results from here.
    pub rounds_from: usize,
    pub guards: GuardState,
    /// Counts tokens the way this model does.
    counter: Arc<dyn TokenCounter>,
    /// Tokens of each message of `history`, counted once when it is added.
    counts: Vec<usize>,
    /// Sum of `counts`.
    history_tokens: usize,
    /// The model's context window and the part of it kept for the reply.
    window: u64,
    reserve: u64,
    tools_cache: Option<(Vec<String>, usize)>,
    /// Estimated tokens of the latest request sent.
    last_sent_tokens: u64,
    /// A lower ceiling on the request, set when the provider refused one as too long.
    room_cap: Option<u64>,
    /// Every tool-call id in the history: a provider that reuses one gets it renamed.
    call_ids: HashSet<String>,
    /// Calls in the history still waiting for their result, kept as messages are pushed,
    /// so an untrimmed request is validated without rescanning the history.
    open_calls: HashSet<String>,
    /// A tool result pushed without an open call (a bug): refused at the next call.
    orphan: Option<String>,
    /// Whether the current model call offered tools.
    pub tools_offered_now: bool,
    /// The user's new message, added (and recorded) when the turn starts running.
    pending_user: Option<String>,
    recorder: Option<Arc<dyn MessageSink>>,
    /// The first message the recorder could not keep: the turn stops at the next step.
    record_failed: Option<String>,
    /// Which calls wait for a person's approval.
    pub approval: ApprovalRules,
    /// How this turn goes on from a pause, if it does.
    resume: Option<Resume>,
    /// A person's decisions about calls of the resumed round, by call id.
    pub decisions: HashMap<String, Decision>,
    /// Notes for the model that the next tool round sends with its results.
    pub pending_notes: Vec<String>,
}

impl<'e> Turn<'e> {
    pub(crate) fn new(
        provider: &'e dyn Provider,
        toolbox: &'e dyn Toolbox,
        request: TurnRequest,
        events: mpsc::Sender<ChatEvent>,
    ) -> Self {
        let started = Instant::now();
        let deadline = request
            .policy
            .deadline_ms
            .map(|ms| started + Duration::from_millis(ms));
        let first_new = request.history.len();
        let counter = counter_for_model(&request.model);
        let counts: Vec<usize> = request.history.iter().map(|m| counter.message(m)).collect();
        let history_tokens = counts.iter().sum();
        let window = request
            .policy
            .context_window
            .unwrap_or_else(|| default_window(&request.model));
        let reserve = request
            .policy
            .reserve_output_tokens
            .unwrap_or_else(|| default_reserve(window));
        let mut turn = Turn {
            provider,
            base_toolbox: toolbox,
            live: None,
            model: request.model,
            policy: request.policy,
            cancel: request.cancel,
            events: Emitter::new(events),
            started,
            deadline,
            stats: TurnStats::default(),
            history: request.history,
            first_new,
            rounds_from: first_new,
            guards: GuardState::default(),
            counter,
            counts,
            history_tokens,
            window,
            reserve,
            tools_cache: None,
            last_sent_tokens: 0,
            room_cap: None,
            call_ids: HashSet::new(),
            open_calls: HashSet::new(),
            orphan: None,
            tools_offered_now: false,
            pending_user: request.user_message,
            recorder: request.recorder,
            record_failed: None,
            approval: request.approval,
            resume: request.resume,
            decisions: HashMap::new(),
            pending_notes: Vec::new(),
        };
        for message in &turn.history {
            match message {
                Message::Assistant { tool_calls, .. } => {
                    turn.call_ids
                        .extend(tool_calls.iter().map(|c| c.id.clone()));
                    turn.open_calls
                        .extend(tool_calls.iter().map(|c| c.id.clone()));
                }
                Message::Tool { tool_call_id, .. } => {
                    turn.open_calls.remove(tool_call_id);
                }
                _ => {}
            }
        }
        turn
    }

    /// Runs the state machine to its one terminal event.
    pub(crate) async fn run(mut self) -> TurnOutcome {
        let resume = self.resume.take();
        let mut resumed_round = None;
        match &resume {
            Some(Resume::Decisions(decisions)) => match self.pending_round(decisions) {
                Ok(round) => resumed_round = Some(round),
                Err(message) => {
                    return self.finish_error(StopReason::InvalidRequest, message).await;
                }
            },
            Some(Resume::Continue) | None => self.answer_interrupted_calls().await,
        }
        // A turn that starts from a user's message, not a resume after client-run tools.
        let has_new_user_message = resume.is_none()
            && (self.pending_user.is_some()
                || matches!(self.history.last(), Some(Message::User { .. })));
        if let Some(text) = self.pending_user.take() {
            self.push(Message::user(text)).await;
        }
        // The one full check of the history the caller gave; later calls only check what
        // the engine itself added (or the whole request again when trimming reshaped it).
        // A round resumed after approval is still open: its calls are answered below.
        let given = match resumed_round {
            Some(_) => &self.history[..self.history.len().saturating_sub(1)],
            None => &self.history[..],
        };
        if let Err(e) = check_history(given) {
            return self
                .finish_error(StopReason::InvalidRequest, e.to_string())
                .await;
        }
        let mut pending: Option<FinalizeCause> = None;
        if !has_new_user_message {
            pending = self.replay_resumed_rounds().await;
        }
        if let Some((calls, text)) = resumed_round {
            self.tools_offered_now = true;
            match self.tool_round(calls, &text).await {
                Step::Continue => {}
                Step::Finalize(cause) => pending = Some(cause),
                Step::Done(outcome) => return outcome,
            }
        }
        if matches!(resume, Some(Resume::Continue)) {
            // A fresh budget: the limits count from here, while the guards keep what the
            // earlier rounds found, so their calls are not made again.
            pending = None;
            self.stats = TurnStats::default();
            self.push(Message::note(CONTINUE_NOTE)).await;
        }
        loop {
            if self.cancel.is_cancelled() {
                return self.finish_cancelled().await;
            }
            if let Some(outcome) = self.stop_if_unrecorded().await {
                return outcome;
            }
            if pending.is_none() {
                pending = self.limit_cause();
            }
            if let Some(cause) = pending.take() {
                return self.finalize(cause).await;
            }
            let tools = self.tools_for_next_call().await;
            self.tools_offered_now = tools.is_some();
            let reply = match self.model_call(tools.as_deref(), None).await {
                Ok(reply) => reply,
                Err(CallEnd::Cancelled) => return self.finish_cancelled().await,
                Err(CallEnd::Deadline) => {
                    pending = Some(self.deadline_cause());
                    continue;
                }
                Err(CallEnd::Invalid(e)) => {
                    return self
                        .finish_error(StopReason::InvalidRequest, e.to_string())
                        .await;
                }
                Err(CallEnd::Overflow(message)) => {
                    return self
                        .finish_error(StopReason::ContextOverflow, message)
                        .await;
                }
                Err(CallEnd::ContextRefused(e)) => return self.context_refused(e).await,
                Err(CallEnd::Provider(e)) => {
                    return self
                        .finish_error(StopReason::ProviderError, e.to_string())
                        .await;
                }
            };
            match self.route(reply).await {
                Step::Continue => {}
                Step::Finalize(cause) => pending = Some(cause),
                Step::Done(outcome) => return outcome,
            }
        }
    }

    /// Decides, from the model's own output, whether the turn is over.
    async fn route(&mut self, reply: Reply) -> Step {
        let Reply {
            text,
            mut tool_calls,
            finish,
            chanted,
            ..
        } = reply;
        if chanted {
            let detail = format!(
                "the reply repeated one chunk of text {} times in a row; it was cut after the first copy \
                 and {} tool call(s) with it were dropped",
                self.policy.chant_repeats.unwrap_or_default(),
                tool_calls.len()
            );
            debug!(
                decision = "done",
                reason = "repetitive_output",
                "the reply chanted"
            );
            self.emit_guard(
                GuardKind::RepetitiveOutput,
                GuardAction::CutReply,
                None,
                detail,
            )
            .await;
            return Step::Done(
                self.finish_with_answer(StopReason::RepetitiveOutput, text)
                    .await,
            );
        }
        self.rename_reused_ids(&mut tool_calls);
        let text_chars = text.trim().chars().count();
        let inputs = format!(
            "model_call={} tool_calls={} finish_reason={:?} text_chars={}",
            self.stats.model_calls,
            tool_calls.len(),
            finish,
            text_chars
        );
        if tool_calls.is_empty() {
            let reason = if finish == Some(FinishReason::Length) {
                StopReason::Truncated
            } else {
                StopReason::Completed
            };
            debug!(%inputs, decision = "done", %reason, "no executable tool calls: the text is the answer");
            self.warn_if_tools_ignored(&text).await;
            let text = self.screened_answer(text).await;
            return Step::Done(self.finish_with_answer(reason, text).await);
        }
        if tool_calls
            .iter()
            .any(|c| self.toolbox().is_external(&c.name))
        {
            debug!(%inputs, decision = "done", reason = "client_tool_calls", "the model called tools the client runs");
            return Step::Done(self.pause_for_client(text, tool_calls).await);
        }
        if self.policy.finish_tool
            && let Some(call) = tool_calls
                .iter()
                .find(|c| c.name == crate::finalize::FINISH_TOOL)
            && let Some(answer) = crate::finalize::finish_answer(&call.arguments)
        {
            debug!(%inputs, decision = "done", reason = "finish_tool", "the model called finish");
            let call = call.clone();
            self.push(Message::Assistant {
                content: non_empty(text),
                tool_calls: vec![call.clone()],
            })
            .await;
            self.emit_call_start(&call).await;
            let ack = "Turn finished with this answer.".to_owned();
            self.events
                .emit(ChatEvent::ToolCallResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    content: ack.clone(),
                    is_error: false,
                })
                .await;
            self.push(Message::tool_result(call.id, ack, false)).await;
            self.events
                .emit(ChatEvent::TextDelta {
                    text: answer.clone(),
                })
                .await;
            return Step::Done(
                self.finish_with_answer(StopReason::FinishTool, answer)
                    .await,
            );
        }
        if self.policy.honor_stop && finish == Some(FinishReason::Stop) && text_chars > 0 {
            debug!(%inputs, decision = "done", reason = "honor_stop", "finish_reason stop is trusted by policy");
            return Step::Done(
                self.accept_answer(GuardKind::HonorStop, text, tool_calls.len())
                    .await,
            );
        }
        if let Some(min) = self.policy.substantive_answer_chars
            && text_chars >= min
        {
            debug!(%inputs, decision = "done", reason = "substantive_answer", threshold = min, "text beside calls is long enough to be the answer");
            return Step::Done(
                self.accept_answer(GuardKind::SubstantiveAnswer, text, tool_calls.len())
                    .await,
            );
        }
        debug!(%inputs, decision = "execute_tools", "executable tool calls present");
        let per_reply = usize::try_from(self.policy.max_calls_per_reply).unwrap_or(usize::MAX);
        if tool_calls.len() > per_reply {
            // Kept out of the history entirely: 100,000 error results would only overflow
            // the next request. The model reads a note saying so instead.
            let asked = tool_calls.len();
            tool_calls.truncate(per_reply);
            self.guards.dropped_calls = Some(asked - per_reply);
            self.emit_guard(
                GuardKind::ToolCallLimit,
                GuardAction::Refused,
                None,
                format!(
                    "the reply asked for {asked} tool calls; the first {per_reply} run (max_calls_per_reply), the rest were dropped"
                ),
            )
            .await;
        }
        if !self.approval.unattended {
            let waiting = self.calls_needing_approval(&tool_calls);
            if !waiting.is_empty() {
                debug!(%inputs, decision = "done", reason = "approval_required", calls = waiting.len(), "calls wait for approval");
                return Step::Done(self.pause_for_approval(text, tool_calls, waiting).await);
            }
        }
        self.push(Message::Assistant {
            content: non_empty(text.clone()),
            tool_calls: tool_calls.clone(),
        })
        .await;
        let step = self.tool_round(tool_calls, &text).await;
        if let Step::Finalize(cause) = &step {
            debug!(decision = "finalize", reason = %cause.reason, detail = %cause.detail, "after tool round");
        }
        step
    }

    /// A history that ends with tool calls and no results (a turn interrupted by a crash)
    /// gets an error result for each, so the conversation can go on.
    async fn answer_interrupted_calls(&mut self) {
        let Some(last_call) = self.history.iter().rposition(
            |m| matches!(m, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()),
        ) else {
            return;
        };
        let Message::Assistant { tool_calls, .. } = &self.history[last_call] else {
            return;
        };
        let later = &self.history[last_call + 1..];
        if later.iter().any(|m| !matches!(m, Message::Tool { .. })) {
            return;
        }
        let open: Vec<String> = tool_calls
            .iter()
            .filter(|c| {
                !later.iter().any(
                    |m| matches!(m, Message::Tool { tool_call_id, .. } if *tool_call_id == c.id),
                )
            })
            .map(|c| c.id.clone())
            .collect();
        for id in open {
            debug!(call = %id, "answering a call an interrupted turn left open");
            self.push(Message::tool_result(
                id,
                "not finished: the turn was interrupted (or the call was still waiting for approval) when the conversation went on",
                true,
            ))
            .await;
        }
    }

    /// Gives a fresh id to any call whose id the conversation already used (some servers
    /// repeat ids across replies), so every result still pairs with exactly one call.
    fn rename_reused_ids(&self, calls: &mut [buddy_core::ToolCall]) {
        let mut taken: HashSet<String> = HashSet::new();
        for call in calls.iter_mut() {
            if self.call_ids.contains(&call.id) || taken.contains(&call.id) || call.id.is_empty() {
                let base = if call.id.is_empty() {
                    "call"
                } else {
                    call.id.as_str()
                };
                let fresh = (2..)
                    .map(|n| format!("{base}_{n}"))
                    .find(|id| !self.call_ids.contains(id) && !taken.contains(id))
                    .unwrap_or_default();
                debug!(old = %call.id, new = %fresh, "tool-call id reused by the provider; renamed");
                call.id = fresh;
            }
            taken.insert(call.id.clone());
        }
    }

    /// Ends the turn handing the client-run calls back to the caller. Server-side calls in
    /// the same reply are dropped: the client could not send their results back.
    async fn pause_for_client(
        &mut self,
        text: String,
        calls: Vec<buddy_core::ToolCall>,
    ) -> TurnOutcome {
        let (external, dropped): (Vec<_>, Vec<_>) = calls
            .into_iter()
            .partition(|c| self.toolbox().is_external(&c.name));
        if !dropped.is_empty() {
            debug!(
                dropped = dropped.len(),
                "server-side calls beside client calls were not run"
            );
        }
        self.push(Message::Assistant {
            content: non_empty(text.clone()),
            tool_calls: external.clone(),
        })
        .await;
        for call in &external {
            self.emit_call_start(call).await;
        }
        self.stats.elapsed_ms = self.elapsed_ms();
        self.events
            .emit(ChatEvent::Done {
                reason: StopReason::ClientToolCalls,
                answer: text.clone(),
                stats: self.stats,
            })
            .await;
        self.outcome(StopReason::ClientToolCalls, Some(text), None)
    }

    /// Warns when tools were offered, none was ever called, and the reply writes a call
    /// as text: the signature of a model server that ignores `tools` (llama-cpp-python
    /// without `tool_choice`), which would otherwise end `completed` with no sign of it.
    async fn warn_if_tools_ignored(&self, text: &str) {
        if !self.tools_offered_now || self.stats.tool_calls > 0 {
            return;
        }
        let specs = self.toolbox().specs();
        let names: Vec<&str> = specs.iter().map(|t| t.name.as_str()).collect();
        if !crate::finalize::looks_like_a_tool_call(text, &names) {
            return;
        }
        let detail = format!(
            "{} tool(s) were offered, but the model wrote a tool call as text instead of making one: \
             the model server may be ignoring `tools`. `buddy doctor --provider NAME` checks it and \
             names the switch to set (llama-cpp-python needs `tool_choice_auto = true`)",
            names.len()
        );
        self.emit_guard(GuardKind::ToolsIgnored, GuardAction::Warned, None, detail)
            .await;
    }

    /// Ends the turn taking `text` as the answer and dropping the calls beside it.
    async fn accept_answer(
        &mut self,
        guard: GuardKind,
        text: String,
        dropped_calls: usize,
    ) -> TurnOutcome {
        let detail = format!(
            "{} characters of answer came with {dropped_calls} tool call(s); the answer was taken and the calls not run",
            text.trim().chars().count()
        );
        self.emit_guard(guard, GuardAction::AcceptedAnswer, None, detail)
            .await;
        self.finish_with_answer(StopReason::Completed, text).await
    }

    /// The tools to offer the next call, or `None` for a plain chat call.
    async fn tools_for_next_call(&mut self) -> Option<Cow<'e, [ToolSpec]>> {
        if let Some(after) = self.policy.withdraw_tools_after
            && self.stats.model_calls >= after
        {
            if !self.guards.tools_withdrawn_announced {
                self.guards.tools_withdrawn_announced = true;
                let detail = format!(
                    "no tools are offered after {after} model calls (policy withdraw_tools_after)"
                );
                self.emit_guard(
                    GuardKind::ToolsWithdrawn,
                    GuardAction::WithdrewAllTools,
                    None,
                    detail,
                )
                .await;
            }
            return None;
        }
        self.follow_tool_changes().await;
        // The usual case borrows the toolbox's own list: no copy per model call.
        let specs = match self.toolbox_handle() {
            ToolboxHandle::Base(base)
                if self.guards.withdrawn.is_empty() && !self.policy.finish_tool =>
            {
                Cow::Borrowed(base.specs())
            }
            toolbox => {
                let mut specs: Vec<ToolSpec> = toolbox
                    .specs()
                    .iter()
                    .filter(|s| !self.guards.withdrawn.contains_key(&s.name))
                    .cloned()
                    .collect();
                if self.policy.finish_tool {
                    specs.push(finish_tool_spec());
                }
                Cow::Owned(specs)
            }
        };
        (!specs.is_empty()).then_some(specs)
    }

    /// The toolbox calls go to: its latest generation when its tools can change.
    pub(crate) fn toolbox(&self) -> &dyn Toolbox {
        match &self.live {
            Some((_, toolbox)) => &**toolbox,
            None => self.base_toolbox,
        }
    }

    /// The toolbox calls go to, held apart from the turn (for work that also changes
    /// the turn, such as running calls while recording their results).
    pub(crate) fn toolbox_handle(&self) -> ToolboxHandle<'e> {
        match &self.live {
            Some((_, toolbox)) => ToolboxHandle::Live(Arc::clone(toolbox)),
            None => ToolboxHandle::Base(self.base_toolbox),
        }
    }

    /// Switches to the toolbox's latest generation when its tools changed (an MCP server
    /// added or removed tools between rounds).
    async fn follow_tool_changes(&mut self) {
        let Some((generation, toolbox)) = self.base_toolbox.latest().await else {
            return;
        };
        let previous = self.live.as_ref().map(|(g, _)| *g);
        if previous == Some(generation) {
            return;
        }
        if previous.is_some() {
            let names: Vec<&str> = toolbox.specs().iter().map(|t| t.name.as_str()).collect();
            debug!(generation, tools = %names.join(","), "the tool list changed; the next call offers the new list");
        }
        self.tools_cache = None;
        self.live = Some((generation, toolbox));
    }

    /// A limit that has been reached before the next model call, if any.
    fn limit_cause(&self) -> Option<FinalizeCause> {
        let p = &self.policy;
        let calls = self.stats.model_calls;
        let capped = match p.on_limit {
            OnLimit::Finalize => calls + 1 >= p.max_model_calls,
            OnLimit::Error => calls >= p.max_model_calls,
        };
        if capped {
            return Some(FinalizeCause::new(
                StopReason::MaxModelCalls,
                GuardKind::ModelCallLimit,
                format!("{calls} of {} model calls used", p.max_model_calls),
            ));
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Some(self.deadline_cause());
        }
        if let Some(budget) = p.max_turn_tokens {
            let used = self.stats.input_tokens + self.stats.output_tokens;
            if used >= budget {
                return Some(FinalizeCause::new(
                    StopReason::TokenBudget,
                    GuardKind::TokenBudget,
                    format!("{used} of {budget} tokens used"),
                ));
            }
        }
        None
    }

    pub(crate) fn deadline_cause(&self) -> FinalizeCause {
        FinalizeCause::new(
            StopReason::Deadline,
            GuardKind::Deadline,
            format!(
                "the turn's deadline of {} ms passed",
                self.policy.deadline_ms.unwrap_or_default()
            ),
        )
    }

    /// One model call over the history (plus a Finalize instruction, if given), fitted
    /// to the model's context window first. When the provider refuses the request as too
    /// long for its window (buddy's estimate was low for this model), the room is cut to
    /// 60 % of what was sent, for the rest of the turn, and the call is made once more.
    pub(crate) async fn model_call(
        &mut self,
        tools: Option<&[ToolSpec]>,
        finalize_instruction: Option<&str>,
    ) -> Result<Reply, CallEnd> {
        let mut retried = false;
        loop {
            match self.model_call_once(tools, finalize_instruction).await {
                Err(CallEnd::Provider(e)) if e.is_context_length() => {
                    if retried {
                        return Err(CallEnd::ContextRefused(e));
                    }
                    retried = true;
                    // The refused request produced no reply; the retry takes its number.
                    self.stats.model_calls = self.stats.model_calls.saturating_sub(1);
                    let cap = self.last_sent_tokens.saturating_mul(6) / 10;
                    self.room_cap = Some(cap);
                    let detail = format!(
                        "the provider refused the request as too long for the model's context ({e}); buddy \
                         trims the history to {cap} estimated tokens and retries once"
                    );
                    self.emit_guard(GuardKind::ContextWindow, GuardAction::Trimmed, None, detail)
                        .await;
                }
                other => return other,
            }
        }
    }

    async fn model_call_once(
        &mut self,
        tools: Option<&[ToolSpec]>,
        finalize_instruction: Option<&str>,
    ) -> Result<Reply, CallEnd> {
        let tools_tokens = tools.map_or(0, |t| self.tools_tokens(t));
        let instruction = finalize_instruction.map(Message::note);
        let instruction_tokens = instruction.as_ref().map_or(0, |m| self.counter.message(m));
        let room = self
            .window
            .saturating_sub(self.reserve)
            .min(self.room_cap.unwrap_or(u64::MAX));
        let budget = usize::try_from(room)
            .unwrap_or(usize::MAX)
            .saturating_sub(tools_tokens + instruction_tokens);
        let fitted = fit(
            &self.history,
            &self.counts,
            self.history_tokens,
            budget,
            &*self.counter,
        )
        .map_err(|overflow| CallEnd::Overflow(self.overflow_message(&overflow, tools_tokens)))?;
        if fitted.dropped > 0 || fitted.truncated > 0 {
            let detail = format!(
                "{} earlier message(s) left out and {} tool result(s) cut so the request fits {} of the {} token window",
                fitted.dropped, fitted.truncated, room, self.window
            );
            self.emit_guard(GuardKind::ContextWindow, GuardAction::Trimmed, None, detail)
                .await;
        }
        let context_tokens = fitted.tokens + instruction_tokens + tools_tokens;
        self.last_sent_tokens = context_tokens as u64;
        let mut messages = fitted.messages;
        if let Some(instruction) = instruction {
            messages.to_mut().push(instruction);
        }
        match &messages {
            // The history as the engine built it: its invariants were kept push by push.
            Cow::Borrowed(_) => self.check_pushed().map_err(CallEnd::Invalid)?,
            // Trimmed or extended: check the request actually sent.
            Cow::Owned(sent) => check_history(sent).map_err(CallEnd::Invalid)?,
        }
        let request = CompletionRequest {
            model: &self.model,
            messages: &messages,
            tools,
            tool_choice: finalize_instruction.and(tools).map(|_| ToolChoice::None),
            max_output_tokens: None,
        };
        // The Finalize call has its own short grace, so that a turn past its deadline (or a
        // server that never ends a reply) still ends by deadline + grace.
        let deadline = match finalize_instruction {
            None => self.deadline,
            Some(_) => Some(Instant::now() + Duration::from_millis(self.policy.finalize_grace_ms)),
        };
        let chant = self.policy.chant_repeats.map(|repeats| {
            ChantDetector::new(
                self.policy.chant_min_chars,
                usize::try_from(repeats).unwrap_or(usize::MAX),
            )
        });
        let result = stream_reply(
            self.provider,
            &self.events,
            &self.cancel,
            deadline,
            chant,
            request,
        )
        .await;
        drop(messages);
        self.stats.model_calls += 1;
        let reply = result?;
        let usage = reply.usage.unwrap_or_else(|| Usage {
            input_tokens: context_tokens as u64,
            output_tokens: (self.counter.text(&reply.text)
                + reply
                    .tool_calls
                    .iter()
                    .map(|c| self.counter.text(&c.name) + self.counter.text(&c.arguments))
                    .sum::<usize>()) as u64,
        });
        self.stats.input_tokens += usage.input_tokens;
        self.stats.output_tokens += usage.output_tokens;
        self.events
            .emit(ChatEvent::IterationStats {
                model_call: self.stats.model_calls,
                finish_reason: reply.finish.clone(),
                tool_calls_requested: u32::try_from(reply.tool_calls.len()).unwrap_or(u32::MAX),
                tools_offered: match (finalize_instruction, tools) {
                    (None, Some(t)) => u32::try_from(t.len()).unwrap_or(u32::MAX),
                    _ => 0,
                },
                input_tokens: self.stats.input_tokens,
                output_tokens: self.stats.output_tokens,
                context_tokens: context_tokens as u64,
                context_window: self.window,
                elapsed_ms: self.elapsed_ms(),
            })
            .await;
        Ok(reply)
    }

    /// The request check for an untrimmed history, from the state kept by `push`.
    fn check_pushed(&self) -> Result<(), HistoryError> {
        if let Some(id) = &self.orphan {
            return Err(HistoryError::OrphanResult(id.clone()));
        }
        match self.open_calls.iter().next() {
            Some(id) => Err(HistoryError::MissingResult(id.clone())),
            None => Ok(()),
        }
    }

    /// Tokens of a tool list, counted once per distinct list.
    fn tools_tokens(&mut self, tools: &[ToolSpec]) -> usize {
        if let Some((names, tokens)) = &self.tools_cache
            && names.len() == tools.len()
            && names.iter().zip(tools).all(|(n, t)| *n == t.name)
        {
            return *tokens;
        }
        let tokens = self.counter.tools(tools);
        self.tools_cache = Some((tools.iter().map(|t| t.name.clone()).collect(), tokens));
        tokens
    }

    fn overflow_message(&self, overflow: &Overflow, tools_tokens: usize) -> String {
        format!(
            "{overflow}: `{}` has a {} token window, {} are kept for the reply and {tools_tokens} go to tool \
             definitions. Shorten what is too large (a model reply too large for its window \
             points at max_reply_bytes and max_calls_per_reply), or raise context_window (or lower \
             reserve_output_tokens) in the policy",
            self.model, self.window, self.reserve
        )
    }

    /// Emits one `GuardTripped` event.
    pub(crate) async fn emit_guard(
        &self,
        guard: GuardKind,
        action: GuardAction,
        skill: Option<&str>,
        detail: String,
    ) {
        self.emit_guard_with(guard, action, skill, detail, Vec::new())
            .await;
    }

    /// Emits one `GuardTripped` event with the calls that made the guard act.
    pub(crate) async fn emit_guard_with(
        &self,
        guard: GuardKind,
        action: GuardAction,
        skill: Option<&str>,
        detail: String,
        evidence: Vec<Evidence>,
    ) {
        debug!(guard = guard.as_str(), action = action.as_str(), skill, %detail, evidence = evidence.len(), "guard tripped");
        self.events
            .emit(ChatEvent::GuardTripped {
                guard,
                action,
                skill: skill.map(str::to_owned),
                detail,
                evidence,
            })
            .await;
    }

    /// Announces a tool call the engine is about to run or answer.
    pub(crate) async fn emit_call_start(&self, call: &buddy_core::ToolCall) {
        self.events
            .emit(ChatEvent::ToolCallStart {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            })
            .await;
    }

    /// Appends a message to the history and records it (waiting until it is kept). After
    /// a failed record nothing more is recorded, so what is kept is a prefix of the turn.
    pub(crate) async fn push(&mut self, message: Message) {
        if let Some(recorder) = &self.recorder
            && self.record_failed.is_none()
            && let Err(e) = recorder.record(&message).await
        {
            warn!(error = %e, "a message of the turn could not be recorded; the turn stops");
            self.record_failed = Some(e.to_string());
        }
        let tokens = self.counter.message(&message);
        match &message {
            Message::Assistant { tool_calls, .. } => {
                self.call_ids
                    .extend(tool_calls.iter().map(|c| c.id.clone()));
                self.open_calls
                    .extend(tool_calls.iter().map(|c| c.id.clone()));
            }
            Message::Tool { tool_call_id, .. } if !self.open_calls.remove(tool_call_id) => {
                self.orphan.get_or_insert_with(|| tool_call_id.clone());
            }
            _ => {}
        }
        self.counts.push(tokens);
        self.history_tokens += tokens;
        self.history.push(message);
    }

    /// Milliseconds since the turn started.
    pub(crate) fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The provider refused the request as too long twice: answer from the tool results
    /// if there are any, else end with an error that says what to change.
    pub(crate) async fn context_refused(&mut self, e: buddy_core::ProviderError) -> TurnOutcome {
        warn!(error = %e, "the provider refused the request as too long, even trimmed");
        if has_successful_results(&self.history[self.rounds_from..]) {
            return self
                .finish_with_answer(StopReason::ContextOverflow, String::new())
                .await;
        }
        self.finish_error(
            StopReason::ContextOverflow,
            format!(
                "{e}; buddy trimmed the history and retried, and it still does not fit: set the model's \
                 context_window in the policy, or shorten the message or system prompt"
            ),
        )
        .await
    }

    /// Ends with `Done`, writing an answer from the tool results if the model gave none.
    pub(crate) async fn finish_with_answer(
        &mut self,
        reason: StopReason,
        text: String,
    ) -> TurnOutcome {
        // An empty answer is never `completed`: buddy writes one from the tool results
        // and says so in the stop reason.
        let (reason, answer) = if text.trim().is_empty() {
            let reason = match reason {
                StopReason::Completed | StopReason::FinishTool => StopReason::NoAnswer,
                other => other,
            };
            let fallback = fallback_answer(&self.history[self.rounds_from..], reason);
            self.events
                .emit(ChatEvent::TextDelta {
                    text: fallback.clone(),
                })
                .await;
            (reason, fallback)
        } else {
            (reason, text)
        };
        self.push(Message::assistant(answer.clone())).await;
        if let Some(outcome) = self.stop_if_unrecorded().await {
            return outcome;
        }
        self.stats.elapsed_ms = self.elapsed_ms();
        debug!(%reason, stats = ?self.stats, "turn done");
        self.events
            .emit(ChatEvent::Done {
                reason,
                answer: answer.clone(),
                stats: self.stats,
            })
            .await;
        self.outcome(reason, Some(answer), None)
    }

    /// Ends with `store_error` once a message could not be recorded: a turn whose
    /// messages are not kept does not go on calling the model.
    pub(crate) async fn stop_if_unrecorded(&mut self) -> Option<TurnOutcome> {
        let failure = self.record_failed.take()?;
        let message = format!(
            "the conversation could not be stored ({failure}); the turn was stopped and its \
             unstored messages dropped. Check the server's store, then send the message again"
        );
        Some(self.finish_error(StopReason::StoreError, message).await)
    }

    /// Ends with `Error`.
    pub(crate) async fn finish_error(
        &mut self,
        reason: StopReason,
        message: String,
    ) -> TurnOutcome {
        self.stats.elapsed_ms = self.elapsed_ms();
        debug!(%reason, %message, "turn ended with an error");
        self.events
            .emit(ChatEvent::Error {
                reason,
                message: message.clone(),
                stats: self.stats,
            })
            .await;
        self.outcome(reason, None, Some(message))
    }

    /// Ends with `Done(Cancelled)`.
    pub(crate) async fn finish_cancelled(&mut self) -> TurnOutcome {
        self.stats.elapsed_ms = self.elapsed_ms();
        debug!("turn cancelled");
        self.events
            .emit(ChatEvent::Done {
                reason: StopReason::Cancelled,
                answer: String::new(),
                stats: self.stats,
            })
            .await;
        self.outcome(StopReason::Cancelled, None, None)
    }

    /// The outcome of the turn, taking its history.
    pub(crate) fn outcome(
        &mut self,
        reason: StopReason,
        answer: Option<String>,
        error: Option<String>,
    ) -> TurnOutcome {
        TurnOutcome {
            reason,
            answer,
            error,
            stats: self.stats,
            messages: std::mem::take(&mut self.history),
            first_new: self.first_new,
        }
    }
}

/// What the model reads when a person gives a capped turn more budget.
const CONTINUE_NOTE: &str = "[buddy] The person gave you more budget for this task. Continue where you \
     stopped; the results above are still valid, so do not repeat calls you already made.";

/// `text`, unless it is blank.
pub(crate) fn non_empty(text: String) -> Option<String> {
    (!text.trim().is_empty()).then_some(text)
}
