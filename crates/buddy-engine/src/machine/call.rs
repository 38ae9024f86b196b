//! CallModel: check the limits, choose the tools to offer, fit the request to the
//! model's window, make the call and record the reply on the tape.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use buddy_core::{
    CallPurpose, ChatEvent, CompletionRequest, GuardAction, GuardKind, Message, ModelCallEnd,
    ProviderError, StopReason, ToolChoice, ToolSpec, Usage,
};
use tracing::{debug, warn};

use super::{End, State, ToolboxHandle, Turn, announce_to};
use crate::context::shed::{Shed, called_tools, compact_tools, reserve_floor, without_notes};
use crate::context::{Overflow, fit};
use crate::guards::canonical::canonical_args;
use crate::guards::chant::ChantDetector;
use crate::history_check::check_history;
use crate::judge::answer::has_successful_results;
use crate::judge::limits::{Offer, limit_cause, offer};
use crate::judge::route::FINISH_TOOL;
use crate::judge::verdict::{FinalizeCause, Trip};
use crate::model_call::{CallEnd, Reply, stream_reply};
use crate::tape::{Interruption, TapeStep, tools_of};
use crate::words;

impl<'e> Turn<'e> {
    /// The CallModel step.
    pub(super) async fn call_model(&mut self, purpose: CallPurpose) -> State {
        if let Some(end) = self.stopped_before_call() {
            return State::End(end);
        }
        let estimate = self.next_call_estimate();
        if let Some(cause) = limit_cause(
            &self.judge.policy,
            &self.stats,
            self.deadline_passed(),
            estimate,
        ) {
            return State::Finalize(cause);
        }
        let tools = self.tools_for_next_call().await;
        self.tools_offered_now = tools.is_some();
        match self.model_call(tools.as_deref(), None, purpose).await {
            Ok(reply) => State::Route(reply),
            Err(end) => self.call_failed(end).await,
        }
    }

    /// Where a model call that produced no reply leaves the turn.
    async fn call_failed(&mut self, end: CallEnd) -> State {
        State::End(match end {
            CallEnd::Cancelled => End::Cancelled,
            CallEnd::Deadline => {
                return State::Finalize(FinalizeCause::deadline(self.judge.policy.deadline_ms));
            }
            CallEnd::Invalid(e) => End::Failed {
                reason: StopReason::InvalidRequest,
                message: e.to_string(),
            },
            CallEnd::Overflow(message) => End::Failed {
                reason: StopReason::ContextOverflow,
                message,
            },
            CallEnd::ContextRefused(e) => self.context_refused(&e),
            // The server's own loop guard: another request with this history fails the
            // same way, so the turn asks for its answer without the repeated rounds.
            CallEnd::Provider(e) if e.is_repetition_refusal() => {
                // The refused request produced no reply: it takes no model call's number.
                self.stats.model_calls = self.stats.model_calls.saturating_sub(1);
                return State::Finalize(FinalizeCause::new(
                    StopReason::ProviderRefusedLoop,
                    GuardKind::ProviderLoopRefusal,
                    format!(
                        "the model server refused the conversation for repeating tool calls ({e}); the \
                         final answer is asked for without the repeated rounds"
                    ),
                ));
            }
            CallEnd::Provider(e) => End::Failed {
                reason: StopReason::ProviderError,
                message: e.to_string(),
            },
        })
    }

    /// The provider refused the request as too long twice: answer from the tool results
    /// if there are any, else end with an error that says what to change.
    fn context_refused(&self, e: &ProviderError) -> End {
        warn!(error = %e, "the provider refused the request as too long, even trimmed");
        if has_successful_results(self.ledger.this_turn()) {
            return End::Answered {
                reason: StopReason::ContextOverflow,
                text: String::new(),
            };
        }
        End::Failed {
            reason: StopReason::ContextOverflow,
            message: format!(
                "{e}; buddy trimmed the history and retried, and it still does not fit: set the model's \
                 context_window in the policy, or shorten the message or system prompt"
            ),
        }
    }

    /// The tools to offer the next call, or `None` for a plain chat call.
    async fn tools_for_next_call(&mut self) -> Option<Cow<'e, [ToolSpec]>> {
        match offer(
            &self.judge.policy,
            &mut self.judge.memory,
            self.stats.model_calls,
        ) {
            Offer::Nothing(trip) => {
                if let Some(trip) = trip {
                    self.announce(trip).await;
                }
                return None;
            }
            Offer::Tools => {}
        }
        self.follow_tool_changes().await;
        let withdrawn = &self.judge.memory.withdrawn;
        let finish_tool = self.judge.policy.finish_tool;
        // The usual case borrows the toolbox's own list: no copy per model call.
        let specs = match self.toolbox_handle() {
            ToolboxHandle::Base(base) if withdrawn.is_empty() && !finish_tool => {
                Cow::Borrowed(base.specs())
            }
            toolbox => {
                let mut specs: Vec<ToolSpec> = toolbox
                    .specs()
                    .iter()
                    .filter(|s| !withdrawn.contains_key(&s.name))
                    .cloned()
                    .collect();
                if finish_tool {
                    specs.push(finish_tool_spec());
                }
                Cow::Owned(specs)
            }
        };
        (!specs.is_empty()).then_some(specs)
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
        let tools = tools_of(&*toolbox);
        if tools != self.tape.tools || previous.is_some() {
            self.tape.steps.push(TapeStep::Tools {
                before_call: self.stats.model_calls + 1,
                tools,
            });
        }
        self.window.tools_cache = None;
        self.live = Some((generation, toolbox));
    }

    /// One model call over the history (plus a Finalize instruction, if given), fitted
    /// to the model's context window first. When the provider refuses the request as too
    /// long for its window (buddy's estimate was low for this model), the room is cut to
    /// 60 % of what was sent, for the rest of the turn, and the call is made once more.
    pub(super) async fn model_call(
        &mut self,
        tools: Option<&[ToolSpec]>,
        finalize_instruction: Option<&str>,
        purpose: CallPurpose,
    ) -> Result<Reply, CallEnd> {
        let mut retried = false;
        loop {
            let result = self
                .model_call_once(tools, finalize_instruction, purpose)
                .await;
            match &result {
                Err(CallEnd::Provider(e)) => self.tape.steps.push(TapeStep::failed(purpose, e)),
                Err(CallEnd::Cancelled) => self.tape.steps.push(TapeStep::Interrupted {
                    cause: Interruption::Cancelled,
                }),
                Err(CallEnd::Deadline) => self.tape.steps.push(TapeStep::Interrupted {
                    cause: Interruption::Deadline,
                }),
                _ => {}
            }
            match result {
                Err(CallEnd::Provider(e)) if e.is_context_length() => {
                    if retried {
                        return Err(CallEnd::ContextRefused(e));
                    }
                    retried = true;
                    // The refused request produced no reply; the retry takes its number.
                    self.stats.model_calls = self.stats.model_calls.saturating_sub(1);
                    if std::mem::take(&mut self.window.last_sent_bounded) {
                        let instruction = finalize_instruction
                            .map_or(0, |i| self.ledger.counter().message(&Message::note(i)));
                        self.window.last_sent_tokens =
                            self.exact_request(tools, instruction) as u64;
                    }
                    let cap = self.window.last_sent_tokens.saturating_mul(6) / 10;
                    self.window.room_cap = Some(cap);
                    let detail = format!(
                        "the provider refused the request as too long for the model's context ({e}); buddy \
                         trims the history to {cap} estimated tokens and retries once"
                    );
                    self.announce(Trip::new(
                        GuardKind::ContextWindow,
                        GuardAction::Trimmed,
                        detail,
                    ))
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
        purpose: CallPurpose,
    ) -> Result<Reply, CallEnd> {
        let instruction = finalize_instruction.map(Message::note);
        let instruction_tokens = instruction
            .as_ref()
            .map_or(0, |m| self.ledger.counter().message(m));
        // Upper bounds first: while the whole request fits by them, nothing is counted
        // exactly (the first fit below then keeps everything, as exact counts would).
        let (mut full_tools_tokens, mut tools_exact) =
            tools.map_or((0, true), |t| self.tools_size(t));
        let bounded_size = self.whole_request(full_tools_tokens, instruction_tokens);
        if !(self.ledger.is_exact() && tools_exact)
            && u64::try_from(bounded_size).unwrap_or(u64::MAX) > self.room(Shed::Nothing)
        {
            self.ledger.count_exactly();
            if let Some(tools) = tools {
                full_tools_tokens = self.tools_tokens_exact(tools);
                tools_exact = true;
            }
        }
        let bounded = !(self.ledger.is_exact() && tools_exact);
        // What the request leaves out when even its pinned messages do not fit.
        let mut shed = Shed::Nothing;
        let mut without: Option<(Vec<Message>, Vec<usize>, usize)> = None;
        let mut compact: Option<(Vec<ToolSpec>, usize)> = None;
        let (room, tools_tokens, fitted) = loop {
            if shed >= Shed::Notes && without.is_none() {
                let (kept, counts, dropped) =
                    without_notes(self.ledger.messages(), self.ledger.counts());
                without = Some((kept, counts, dropped));
            }
            // Each level is tried once, in order: the tool list is made at the two that change it.
            if let Some(tools) = tools
                && matches!(shed, Shed::ToolDetails | Shed::UnusedTools)
            {
                let small = if shed == Shed::UnusedTools {
                    compact_tools(&called_tools(tools, self.ledger.messages()))
                } else {
                    compact_tools(tools)
                };
                let tokens = self.ledger.counter().tools(&small);
                compact = Some((small, tokens));
            }
            let tools_tokens = compact.as_ref().map_or(full_tools_tokens, |(_, t)| *t);
            let room = self.room(shed);
            let budget = usize::try_from(room)
                .unwrap_or(usize::MAX)
                .saturating_sub(tools_tokens + instruction_tokens);
            let fitted = match &without {
                Some((kept, counts, _)) => {
                    let total = counts.iter().sum();
                    fit(kept, counts, total, budget, self.ledger.counter()).map(|f| f.into_owned())
                }
                None => fit(
                    self.ledger.messages(),
                    self.ledger.counts(),
                    self.ledger.tokens(),
                    budget,
                    self.ledger.counter(),
                ),
            };
            match (fitted, shed.next()) {
                (Ok(fitted), _) => break (room, tools_tokens, fitted),
                (Err(_), Some(next)) => shed = next,
                (Err(overflow), None) => {
                    return Err(CallEnd::Overflow(
                        self.overflow_message(&overflow, tools_tokens),
                    ));
                }
            }
        };
        let tools = match (&compact, tools) {
            (Some((small, _)), Some(_)) => Some(small.as_slice()),
            (_, tools) => tools,
        };
        if shed > Shed::Nothing {
            let detail = self.shed_words(
                shed,
                without.as_ref().map_or(0, |w| w.2),
                full_tools_tokens,
                tools_tokens,
            );
            let trip = Trip::new(GuardKind::ContextWindow, GuardAction::Shed, detail);
            announce_to(&self.events, &mut self.tape, self.stats.model_calls, trip).await;
        }
        if fitted.dropped > 0 || fitted.truncated > 0 {
            let detail = format!(
                "{} earlier message(s) left out and {} tool result(s) cut so the request fits {} of the {} token window",
                fitted.dropped, fitted.truncated, room, self.window.window
            );
            let trip = Trip::new(GuardKind::ContextWindow, GuardAction::Trimmed, detail);
            announce_to(&self.events, &mut self.tape, self.stats.model_calls, trip).await;
        }
        let context_tokens = fitted.tokens + instruction_tokens + tools_tokens;
        let mut messages = fitted.messages;
        if self.prune_repeats {
            let kept = without_repeated_rounds(&messages);
            if kept.len() < messages.len() {
                messages = std::borrow::Cow::Owned(kept);
            }
        }
        if let Some(instruction) = instruction {
            messages.to_mut().push(instruction);
        }
        match &messages {
            // The history as the engine built it: its invariants were kept push by push.
            Cow::Borrowed(_) => self.ledger.check_pushed().map_err(CallEnd::Invalid)?,
            // Trimmed or extended: check the request actually sent.
            Cow::Owned(sent) => check_history(sent).map_err(CallEnd::Invalid)?,
        }
        self.window.last_sent_tokens = context_tokens as u64;
        self.window.last_sent_bounded = bounded;
        let mut request = CompletionRequest {
            model: &self.model,
            messages: &messages,
            tools,
            tool_choice: finalize_instruction.and(tools).map(|_| ToolChoice::None),
            max_output_tokens: self.sampling.max_output_tokens,
            purpose,
            traceparent: None,
            sampling: (!self.sampling.is_default()).then_some(&self.sampling),
        };
        let traceparent = self
            .events
            .observer()
            .and_then(|o| o.model_call_started(&request));
        request.traceparent = traceparent.as_deref();
        // The Finalize call has its own short grace, so that a turn past its deadline (or a
        // server that never ends a reply) still ends by deadline + grace.
        let deadline = match finalize_instruction {
            None => self.deadline,
            Some(_) => {
                Some(Instant::now() + Duration::from_millis(self.judge.policy.finalize_grace_ms))
            }
        };
        let chant = self.judge.policy.chant_repeats.map(|repeats| {
            ChantDetector::new(
                self.judge.policy.chant_min_chars,
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
        let mut reply = match result {
            Ok(reply) => reply,
            Err(end) => {
                if let Some(observer) = self.events.observer() {
                    observer.model_call_ended(&ended_without_reply(&end));
                }
                return Err(end);
            }
        };
        // The provider's count of the request, when it gives one (a request is never
        // empty, so a 0 means a server that fills usage without counting); without it, the
        // request's size is buddy's exact count.
        let reported = reply.usage.map(|u| u.input_tokens).filter(|&n| n > 0);
        let counted = match reported {
            None if bounded => self.exact_request(tools, instruction_tokens),
            _ => context_tokens,
        };
        let usage = reply.usage.unwrap_or_else(|| Usage {
            input_tokens: counted as u64,
            output_tokens: (self.ledger.counter().text(&reply.text)
                + reply
                    .tool_calls
                    .iter()
                    .map(|c| {
                        self.ledger.counter().text(&c.name)
                            + self.ledger.counter().text(&c.arguments)
                    })
                    .sum::<usize>()) as u64,
            cached_input_tokens: 0,
        });
        reply.tape_step = self.tape.reply(
            purpose,
            &reply.text,
            reply.finish.clone(),
            reply.usage,
            reply.chanted.clone(),
        );
        self.stats.input_tokens += usage.input_tokens;
        self.stats.output_tokens += usage.output_tokens;
        let cost = self.price.map(|price| price.cost(&usage));
        if let Some(cost) = cost {
            let spent = self.stats.cost_usd.unwrap_or_default();
            self.stats.cost_usd = Some(spent.saturating_add(cost));
            self.last_call_cost = Some(cost);
        }
        if let Some(observer) = self.events.observer() {
            observer.model_call_ended(&ModelCallEnd {
                text: &reply.text,
                tool_calls: &reply.tool_calls,
                finish: reply.finish.as_ref(),
                usage: Some(usage),
                cost,
                error: None,
                message: None,
            });
        }
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
                context_tokens: reported.unwrap_or(counted as u64),
                context_window: self.window.window,
                elapsed_ms: self.elapsed_ms(),
                cost_usd: cost,
            })
            .await;
        Ok(reply)
    }

    /// What a request left out to fit the window, in words.
    fn shed_words(
        &self,
        shed: Shed,
        notes: usize,
        tools_before: usize,
        tools_after: usize,
    ) -> String {
        let mut parts = Vec::new();
        if notes > 0 {
            parts.push(format!("{notes} of buddy's own notes"));
        }
        if shed >= Shed::ToolDetails {
            parts.push(format!(
                "the details of the tool definitions ({tools_before} → {tools_after} tokens)"
            ));
        }
        if shed >= Shed::UnusedTools {
            parts.push("the tools the conversation has not called".to_owned());
        }
        if shed >= Shed::Reserve {
            parts.push(format!(
                "part of the reply's reserve ({} → {} tokens)",
                self.window.reserve,
                reserve_floor(self.window.reserve)
            ));
        }
        if parts.is_empty() {
            parts.push("nothing yet: buddy has no notes in this request".to_owned());
        }
        format!(
            "even the messages a request must keep did not fit the {}-token window, so this request \
             leaves out {}",
            self.window.window,
            parts.join(", ")
        )
    }

    /// Tokens of a tool list (its upper bound, or its count when counting is cheap or was
    /// needed) and whether they are exact, made once per distinct list.
    fn tools_size(&mut self, tools: &[ToolSpec]) -> (usize, bool) {
        if let Some((names, tokens, exact)) = &self.window.tools_cache
            && names.len() == tools.len()
            && names.iter().zip(tools).all(|(n, t)| *n == t.name)
        {
            return (*tokens, *exact);
        }
        let counter = self.ledger.counter();
        let (tokens, exact) = match counter.tools_bound(tools) {
            Some(bound) => (bound, false),
            None => (counter.tools(tools), true),
        };
        self.window.tools_cache = Some((
            tools.iter().map(|t| t.name.clone()).collect(),
            tokens,
            exact,
        ));
        (tokens, exact)
    }

    /// Exact tokens of a tool list, counted once per distinct list.
    fn tools_tokens_exact(&mut self, tools: &[ToolSpec]) -> usize {
        match self.tools_size(tools) {
            (tokens, true) => tokens,
            (_, false) => {
                let tokens = self.ledger.counter().tools(tools);
                if let Some(cache) = &mut self.window.tools_cache {
                    (cache.1, cache.2) = (tokens, true);
                }
                tokens
            }
        }
    }

    /// The exact size of a request that held the whole history, `tools` and an
    /// instruction of `instruction_tokens`: what was only bounded is counted now.
    fn exact_request(&mut self, tools: Option<&[ToolSpec]>, instruction_tokens: usize) -> usize {
        self.ledger.count_exactly();
        let tools_tokens = tools.map_or(0, |t| self.tools_tokens_exact(t));
        self.whole_request(tools_tokens, instruction_tokens)
    }

    /// Tokens of a request that holds the whole history (as the ledger counts it), tools of
    /// `tools_tokens` and an instruction of `instruction_tokens`.
    fn whole_request(&self, tools_tokens: usize, instruction_tokens: usize) -> usize {
        self.ledger.tokens()
            + self.ledger.counter().reply_priming()
            + tools_tokens
            + instruction_tokens
    }

    /// Tokens a request may take at shedding stage `shed`: the window less the reply's
    /// reserve (cut at `Shed::Reserve`), under the cap a refusal set.
    fn room(&self, shed: Shed) -> u64 {
        let reserve = match shed {
            Shed::Reserve => reserve_floor(self.window.reserve),
            _ => self.window.reserve,
        };
        self.window
            .window
            .saturating_sub(reserve)
            .min(self.window.room_cap.unwrap_or(u64::MAX))
    }

    fn overflow_message(&self, overflow: &Overflow, tools_tokens: usize) -> String {
        format!(
            "{overflow}: `{}` has a {} token window, {} are kept for the reply and {tools_tokens} go to tool \
             definitions. Shorten what is too large (a model reply too large for its window \
             points at max_reply_bytes and max_calls_per_reply), or raise context_window (or lower \
             reserve_output_tokens) in the policy",
            self.model, self.window.window, self.window.reserve
        )
    }
}

/// The history less every tool round that only repeats an earlier one (the same calls,
/// by name and canonical arguments) with its results: what a model server that refuses
/// repeated tool calls accepts again.
fn without_repeated_rounds(messages: &[Message]) -> Vec<Message> {
    let mut seen: std::collections::HashSet<Vec<(String, String)>> =
        std::collections::HashSet::new();
    let mut dropped: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut kept = Vec::with_capacity(messages.len());
    for message in messages {
        match message {
            Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                let mut round: Vec<(String, String)> = tool_calls
                    .iter()
                    .map(|c| (c.name.clone(), canonical_args(&c.arguments)))
                    .collect();
                round.sort();
                if !seen.insert(round) {
                    dropped.extend(tool_calls.iter().map(|c| c.id.as_str()));
                    continue;
                }
            }
            Message::Tool { tool_call_id, .. } if dropped.contains(tool_call_id.as_str()) => {
                continue;
            }
            _ => {}
        }
        kept.push(message.clone());
    }
    kept
}

/// The spec of the `finish` tool.
pub(super) fn finish_tool_spec() -> ToolSpec {
    ToolSpec {
        name: FINISH_TOOL.to_owned(),
        description: words::FINISH_DESCRIPTION.to_owned(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"answer": {"type": "string", "description": words::FINISH_ANSWER_DESCRIPTION}},
            "required": ["answer"],
        }),
    }
}

/// A model call that produced no reply, as an observer sees it.
fn ended_without_reply(end: &CallEnd) -> ModelCallEnd<'static> {
    let (error, message) = match end {
        CallEnd::Cancelled => ("cancelled", None),
        CallEnd::Deadline => ("deadline", None),
        CallEnd::Invalid(e) => ("invalid_request", Some(e.to_string())),
        CallEnd::Overflow(m) => ("context_overflow", Some(m.clone())),
        CallEnd::ContextRefused(e) => ("context_overflow", Some(e.to_string())),
        CallEnd::Provider(e) => ("provider_error", Some(e.to_string())),
    };
    ModelCallEnd {
        error: Some(error),
        message,
        ..ModelCallEnd::default()
    }
}
