//! The request a model call sends: sized (upper bounds while they fit, exact counts
//! when they do not), fitted to the model's window by the request budget, announced
//! when it leaves something out, and checked before it is sent.

use std::borrow::Cow;
use std::collections::HashSet;

use buddy_core::{GuardAction, GuardKind, Message, ModelCallEnd, ToolSpec};

use super::Turn;
use crate::context::Overflow;
use crate::context::budget::{Budgeted, Room, whole_request};
use crate::context::shed::{Shed, reserve_floor};
use crate::guards::canonical::canonical_args;
use crate::history_check::check_history;
use crate::judge::Trip;
use crate::model_call::CallEnd;

impl Turn<'_> {
    /// The room the model's window leaves a request.
    pub(super) fn room(&self) -> Room {
        self.window.room
    }

    /// Sizes a request of `tools` and an instruction of `instruction_tokens`: by upper
    /// bounds while the whole request fits by them (then nothing is counted exactly, and
    /// the fit keeps everything, as exact counts would), else exactly. Returns the tools'
    /// tokens and whether the size is only bounded.
    pub(super) fn size_request(
        &mut self,
        tools: Option<&[ToolSpec]>,
        instruction_tokens: usize,
    ) -> (usize, bool) {
        let (mut tools_tokens, mut tools_exact) = tools.map_or((0, true), |t| self.tools_size(t));
        let bounded_size = self.whole_request(tools_tokens, instruction_tokens);
        let exact = self.ledger.is_exact() && tools_exact;
        if !(exact || self.room().holds(bounded_size)) {
            self.ledger.count_exactly();
            if let Some(tools) = tools {
                tools_tokens = self.tools_tokens_exact(tools);
                tools_exact = true;
            }
        }
        (tools_tokens, !(self.ledger.is_exact() && tools_exact))
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
    pub(super) fn exact_request(
        &mut self,
        tools: Option<&[ToolSpec]>,
        instruction_tokens: usize,
    ) -> usize {
        self.ledger.count_exactly();
        let tools_tokens = tools.map_or(0, |t| self.tools_tokens_exact(t));
        self.whole_request(tools_tokens, instruction_tokens)
    }

    /// Tokens of a request that holds the whole history (as the ledger counts it), tools of
    /// `tools_tokens` and an instruction of `instruction_tokens`.
    fn whole_request(&self, tools_tokens: usize, instruction_tokens: usize) -> usize {
        whole_request(
            self.ledger.tokens(),
            self.ledger.counter(),
            tools_tokens,
            instruction_tokens,
        )
    }

    /// The trips that announce what a fitted request left out, if anything.
    pub(super) fn fit_trips(&self, budgeted: &Budgeted<'_, '_>, tools_before: usize) -> Vec<Trip> {
        let mut trips = Vec::new();
        if budgeted.shed > Shed::Nothing {
            let detail = self.shed_words(
                budgeted.shed,
                budgeted.notes_left_out,
                tools_before,
                budgeted.tools_tokens,
            );
            trips.push(Trip::new(
                GuardKind::ContextWindow,
                GuardAction::Shed,
                detail,
            ));
        }
        let fitted = &budgeted.fitted;
        if fitted.dropped > 0 || fitted.truncated > 0 {
            let detail = format!(
                "{} earlier message(s) left out and {} tool result(s) cut so the request fits {} of the {} token window",
                fitted.dropped, fitted.truncated, budgeted.room, self.window.room.window
            );
            trips.push(Trip::new(
                GuardKind::ContextWindow,
                GuardAction::Trimmed,
                detail,
            ));
        }
        trips
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
        let room = self.window.room;
        if shed >= Shed::Reserve {
            parts.push(format!(
                "part of the reply's reserve ({} → {} tokens)",
                room.reserve,
                reserve_floor(room.reserve)
            ));
        }
        if parts.is_empty() {
            parts.push("nothing yet: buddy has no notes in this request".to_owned());
        }
        format!(
            "even the messages a request must keep did not fit the {}-token window, so this request \
             leaves out {}",
            room.window,
            parts.join(", ")
        )
    }

    /// Why a request cannot be sent at all, and what to change.
    pub(super) fn overflow_message(&self, overflow: &Overflow, tools_tokens: usize) -> String {
        format!(
            "{overflow}: `{}` has a {} token window, {} are kept for the reply and {tools_tokens} go to tool \
             definitions. Shorten what is too large (a model reply too large for its window \
             points at max_reply_bytes and max_calls_per_reply), or raise context_window (or lower \
             reserve_output_tokens) in the policy",
            self.model, self.window.room.window, self.window.room.reserve
        )
    }

    /// The messages a request sends: the fitted history (less repeated rounds when the
    /// server refused them) and the instruction, checked.
    pub(super) fn request_messages<'m>(
        &self,
        mut messages: Cow<'m, [Message]>,
        instruction: Option<Message>,
    ) -> Result<Cow<'m, [Message]>, CallEnd> {
        if self.prune_repeats {
            let kept = without_repeated_rounds(&messages);
            if kept.len() < messages.len() {
                messages = Cow::Owned(kept);
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
        Ok(messages)
    }
}

/// The history less every tool round that only repeats an earlier one (the same calls,
/// by name and canonical arguments) with its results: what a model server that refuses
/// repeated tool calls accepts again.
fn without_repeated_rounds(messages: &[Message]) -> Vec<Message> {
    let mut seen: HashSet<Vec<(String, String)>> = HashSet::new();
    let mut dropped: HashSet<&str> = HashSet::new();
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

/// A model call that produced no reply, as an observer sees it.
pub(super) fn ended_without_reply(end: &CallEnd) -> ModelCallEnd<'static> {
    let (error, message) = match end {
        CallEnd::Cancelled(_) => ("cancelled", None),
        CallEnd::Deadline => ("deadline", None),
        CallEnd::Invalid(e) => ("invalid_request", Some(e.to_string())),
        CallEnd::Overflow(m) => ("context_overflow", Some(m.clone())),
        CallEnd::ContextRefused(e) => ("context_overflow", Some(e.to_string())),
        CallEnd::Provider(e) => ("provider_error", Some(e.to_string())),
        CallEnd::NoRoom(why) => ("cost_budget", Some(why.clone())),
    };
    ModelCallEnd {
        error: Some(error),
        message,
        ..ModelCallEnd::default()
    }
}
