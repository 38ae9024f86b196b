//! The ledger of a turn: the history, each message's token count (exact, or a cheap upper
//! bound until the window needs the exact one), every tool-call id and the calls still
//! waiting for their result. It alone appends to the history, recording
//! each message as it is made, so the request step and the judge read it and never
//! reach into the turn.

use std::collections::HashSet;
use std::sync::Arc;

use buddy_core::{Message, MessageSink, TokenCount, ToolCall};
use tracing::{debug, warn};

use crate::context::{TokenCounter, count_key};
use crate::history_check::HistoryError;

/// The largest kept count taken as given (4 billion tokens: no window is near it).
const KEPT_MAX: u64 = u32::MAX as u64;

/// A turn's history and what is known about it.
pub(crate) struct Ledger {
    history: Vec<Message>,
    /// Tokens of each message of `history`: exact where `exact[i]`, else an upper bound
    /// (a BPE count is made only when the window needs it: it costs far more than the bound).
    counts: Vec<usize>,
    exact: Vec<bool>,
    /// Messages counted only by their bound.
    bounded: usize,
    /// Sum of `counts`.
    tokens: usize,
    counter: Arc<dyn TokenCounter>,
    /// What the counts are made by, as kept with stored messages.
    count_key: String,
    /// Index of the first message this turn added.
    first_new: usize,
    /// Where this turn's own rounds start: `first_new`, or earlier for a turn resumed
    /// after client-run tools (their rounds are part of it). Answers quote results from here.
    rounds_from: usize,
    /// Every tool-call id in the history: a provider that reuses one gets it renamed.
    call_ids: HashSet<String, foldhash::fast::RandomState>,
    /// Calls in the history still waiting for their result, kept as messages are pushed,
    /// so an untrimmed request is validated without rescanning the history.
    open_calls: HashSet<String, foldhash::fast::RandomState>,
    /// A tool result pushed without an open call (a bug): refused at the next call.
    orphan: Option<String>,
    recorder: Option<Arc<dyn MessageSink>>,
    /// The first message the recorder could not keep: the turn stops at the next step.
    record_failed: Option<String>,
}

impl Ledger {
    /// The ledger of a turn that starts after `history`; `known[i]`, when made the way
    /// `counter` counts, is message `i`'s count (the rest are bounded or counted).
    pub(crate) fn new(
        history: Vec<Message>,
        known: &[Option<TokenCount>],
        counter: Arc<dyn TokenCounter>,
        recorder: Option<Arc<dyn MessageSink>>,
    ) -> Self {
        let count_key = count_key(&*counter);
        let (counts, exact): (Vec<usize>, Vec<bool>) = history
            .iter()
            .enumerate()
            .map(|(i, m)| match known.get(i) {
                // Capped far above any window, so that sums of kept counts cannot overflow.
                Some(Some(count)) if count.encoding == count_key => (
                    usize::try_from(count.tokens.min(KEPT_MAX)).unwrap_or(usize::MAX),
                    true,
                ),
                _ => bound_or_count(&*counter, m),
            })
            .unzip();
        let first_new = history.len();
        let mut ledger = Ledger {
            tokens: counts.iter().sum(),
            bounded: exact.iter().filter(|e| !**e).count(),
            counts,
            exact,
            counter,
            count_key,
            first_new,
            rounds_from: first_new,
            call_ids: HashSet::default(),
            open_calls: HashSet::default(),
            orphan: None,
            recorder,
            record_failed: None,
            history: Vec::new(),
        };
        for message in &history {
            ledger.track(message);
        }
        ledger.orphan = None;
        ledger.history = history;
        ledger
    }

    /// Keeps call ids and open calls up to date for a message joining the history.
    fn track(&mut self, message: &Message) {
        match message {
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
    }

    /// Appends a message and records it (waiting until it is kept). After a failed
    /// record nothing more is recorded, so what is kept is a prefix of the turn. A
    /// recorder keeps each message with its exact count, so with one every message is
    /// counted as it comes; without one, a cheap bound stands in until the window needs more.
    pub(crate) async fn push(&mut self, message: Message) {
        let (tokens, exact) = match &self.recorder {
            Some(recorder) if self.record_failed.is_none() => {
                let tokens = self.counter.message(&message);
                if let Err(e) = recorder.record_counted(&message, self.kept(tokens)).await {
                    warn!(error = %e, "a message of the turn could not be recorded; the turn stops");
                    self.record_failed = Some(e.to_string());
                }
                (tokens, true)
            }
            _ => bound_or_count(&*self.counter, &message),
        };
        self.track(&message);
        self.counts.push(tokens);
        self.exact.push(exact);
        self.bounded += usize::from(!exact);
        self.tokens += tokens;
        self.history.push(message);
    }

    /// Counts exactly every message known so far only by its bound.
    pub(crate) fn count_exactly(&mut self) {
        if self.bounded == 0 {
            return;
        }
        for (i, message) in self.history.iter().enumerate() {
            if !self.exact[i] {
                let tokens = self.counter.message(message);
                self.tokens = self.tokens - self.counts[i] + tokens;
                self.counts[i] = tokens;
                self.exact[i] = true;
            }
        }
        self.bounded = 0;
    }

    /// True when every count is exact (else some are upper bounds).
    pub(crate) fn is_exact(&self) -> bool {
        self.bounded == 0
    }

    /// The whole history.
    pub(crate) fn messages(&self) -> &[Message] {
        &self.history
    }

    /// Tokens of each message (upper bounds where not yet counted exactly).
    pub(crate) fn counts(&self) -> &[usize] {
        &self.counts
    }

    /// Tokens of the whole history (an upper bound until `is_exact`).
    pub(crate) fn tokens(&self) -> usize {
        self.tokens
    }

    /// How this model counts tokens.
    pub(crate) fn counter(&self) -> &dyn TokenCounter {
        &*self.counter
    }

    /// Index of the first message this turn added.
    pub(crate) fn first_new(&self) -> usize {
        self.first_new
    }

    /// Messages added so far by this turn.
    pub(crate) fn new_count(&self) -> usize {
        self.history.len() - self.first_new
    }

    /// The messages of this turn's own rounds (results quoted in answers come from here).
    pub(crate) fn this_turn(&self) -> &[Message] {
        &self.history[self.rounds_from.min(self.history.len())..]
    }

    /// The turn's rounds start earlier: at `index` (a resume after client-run tools).
    pub(crate) fn rounds_start_at(&mut self, index: usize) {
        self.rounds_from = index.min(self.rounds_from);
    }

    /// The first message the recorder could not keep, once.
    pub(crate) fn take_record_failure(&mut self) -> Option<String> {
        self.record_failed.take()
    }

    /// The request check for an untrimmed history, from the state kept by `push`.
    pub(crate) fn check_pushed(&self) -> Result<(), HistoryError> {
        if let Some(id) = &self.orphan {
            return Err(HistoryError::OrphanResult(id.clone()));
        }
        match self.open_calls.iter().next() {
            Some(id) => Err(HistoryError::MissingResult(id.clone())),
            None => Ok(()),
        }
    }

    /// True when some call's id is empty, repeats within `calls`, or is already taken.
    pub(crate) fn needs_rename(&self, calls: &[ToolCall]) -> bool {
        let mut seen = HashSet::new();
        calls.iter().any(|c| {
            c.id.is_empty() || self.call_ids.contains(&c.id) || !seen.insert(c.id.as_str())
        })
    }

    /// Gives a fresh id to any call whose id the conversation already used (some servers
    /// repeat ids across replies), so every result still pairs with exactly one call.
    /// Returns true when an id changed.
    pub(crate) fn rename_reused_ids(&self, calls: &mut [ToolCall]) -> bool {
        let mut taken: HashSet<String> = HashSet::new();
        let mut renamed = false;
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
                renamed = true;
            }
            taken.insert(call.id.clone());
        }
        renamed
    }

    /// The earlier call with id `id` that already has its result, if the history holds one.
    pub(crate) fn answered_call(&self, id: &str) -> Option<&ToolCall> {
        if !self.call_ids.contains(id) || self.open_calls.contains(id) {
            return None;
        }
        self.history.iter().rev().find_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.iter().find(|c| c.id == id),
            _ => None,
        })
    }

    /// The result the history holds for call `id`: its content and whether it failed.
    pub(crate) fn result_of(&self, id: &str) -> Option<(&str, bool)> {
        self.history.iter().rev().find_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                is_error,
            } if tool_call_id == id => Some((content.as_str(), *is_error)),
            _ => None,
        })
    }

    /// The calls a turn interrupted by a crash left open ([`calls_left_open`]).
    pub(crate) fn interrupted_calls(&self) -> Vec<String> {
        calls_left_open(&self.history)
    }

    /// Index just past the latest user message, if there is one.
    pub(crate) fn after_last_user(&self) -> Option<usize> {
        self.history
            .iter()
            .rposition(Message::is_user)
            .map(|i| i + 1)
    }

    /// The history, taken out at the end of the turn.
    pub(crate) fn take_messages(&mut self) -> Vec<Message> {
        std::mem::take(&mut self.history)
    }

    /// Each message's count, as a store keeps it (call before `take_messages`): none for
    /// a message the turn never needed counted exactly.
    pub(crate) fn kept_counts(&self) -> Vec<Option<TokenCount>> {
        self.counts
            .iter()
            .zip(&self.exact)
            .map(|(&tokens, &exact)| exact.then(|| self.kept(tokens)))
            .collect()
    }

    /// A count of `tokens` as it is kept: with what it was made by.
    fn kept(&self, tokens: usize) -> TokenCount {
        TokenCount {
            encoding: self.count_key.clone(),
            tokens: tokens as u64,
        }
    }
}

/// A message's upper bound when its counter has a cheap one (false: not exact), else its
/// count (true).
fn bound_or_count(counter: &dyn TokenCounter, message: &Message) -> (usize, bool) {
    match counter.message_bound(message) {
        Some(bound) => (bound, false),
        None => (counter.message(message), true),
    }
}

/// The calls a turn interrupted by a crash left open in `history`: the last call
/// message's calls without a result, when nothing but results follows it.
pub fn calls_left_open(history: &[Message]) -> Vec<String> {
    let Some(last_call) = history.iter().rposition(
        |m| matches!(m, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()),
    ) else {
        return Vec::new();
    };
    let Message::Assistant { tool_calls, .. } = &history[last_call] else {
        return Vec::new();
    };
    let later = &history[last_call + 1..];
    if later.iter().any(|m| !matches!(m, Message::Tool { .. })) {
        return Vec::new();
    }
    tool_calls
        .iter()
        .filter(|c| {
            !later
                .iter()
                .any(|m| matches!(m, Message::Tool { tool_call_id, .. } if *tool_call_id == c.id))
        })
        .map(|c| c.id.clone())
        .collect()
}
