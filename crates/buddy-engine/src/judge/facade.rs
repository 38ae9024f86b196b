//! The one door into the judge: a method per step of the turn's state machine, on the
//! [`Judge`] of `memory.rs`. The driver (`machine/`) asks here and nowhere else; the
//! judge's memory stays private to the judge, so every change to it is one of these verdicts.

use std::collections::{BTreeMap, HashMap};

use buddy_core::{Message, RepeatSemantics, StopReason, ToolCall, ToolOutcome, TurnStats, Usd};

use super::answer::{self, FinalCheck, Screened};
use super::limits::{self, Offer};
use super::memory::{Judge, Resent};
use super::round::{RoundFacts, RoundJudge, RoundVerdict, Slot, booked_outcome};
use super::route::{self, ReplyFacts, RouteVerdict};
use super::verdict::{FinalizeCause, Trip};
use crate::approval::Decision;
use crate::budget::TreeStop;
use crate::words::Unanswered;

impl Judge {
    // CallModel.

    /// A limit reached before the next model call, if any: the turn's own (see
    /// [`limits::limit_cause`]), then its tree's (`tree`: what the turn's lease says of
    /// the calls, tokens and money it shares with its sub-agents and parents).
    pub(crate) fn limit_before_call(
        &self,
        stats: &TurnStats,
        deadline_passed: bool,
        last_call: Option<Usd>,
        tree: Option<TreeStop>,
    ) -> Option<FinalizeCause> {
        limits::limit_cause(&self.policy, stats, deadline_passed, last_call)
            .or_else(|| tree.map(limits::tree_cause))
    }

    /// Whether the next call offers tools (none once `withdraw_tools_after` calls are made).
    pub(crate) fn offer(&mut self, model_calls: u32) -> Offer {
        limits::offer(&self.policy, &mut self.memory, model_calls)
    }

    /// True while no skill has been withdrawn.
    pub(crate) fn nothing_withdrawn(&self) -> bool {
        self.memory.withdrawn.is_empty()
    }

    /// True when skill `name` has been withdrawn for the rest of the turn.
    pub(crate) fn is_withdrawn(&self, name: &str) -> bool {
        self.memory.is_withdrawn(name)
    }

    /// True when the turn's history holds a successful tool result (a refused request
    /// can still be answered from it).
    pub(crate) fn has_successful_results(turn_messages: &[Message]) -> bool {
        answer::has_successful_results(turn_messages)
    }

    // Route.

    /// Where `reply` sends the turn; `resent` are its calls that re-send a call which
    /// already ran (by their new id), `is_external` names tools the client runs.
    pub(crate) fn route(
        &mut self,
        reply: ReplyFacts<'_>,
        resent: BTreeMap<String, Resent>,
        is_external: impl Fn(&str) -> bool,
    ) -> RouteVerdict {
        self.memory.resent = resent;
        route::route(&self.policy, &mut self.memory, reply, is_external)
    }

    /// True when call `id` of the latest reply re-sends a call which already ran.
    pub(crate) fn is_resent(&self, id: &str) -> bool {
        self.memory.resent.contains_key(id)
    }

    /// Asks the model to go on after a reply the output limit cut, within the turn's budget.
    pub(crate) fn continuation(&mut self) -> Option<(&'static str, Trip)> {
        answer::continuation(&self.policy, &mut self.memory)
    }

    /// Whether a reply that names a tool in text, when no tool was called, ignored the tools.
    pub(crate) fn tools_ignored(
        text: &str,
        tools_offered: bool,
        tool_calls_so_far: u32,
        tools: &[&str],
    ) -> Option<Trip> {
        answer::tools_ignored(text, tools_offered, tool_calls_so_far, tools)
    }

    /// A reply without calls, screened as the turn's answer against what buddy said in
    /// `turn_messages`.
    pub(crate) fn screen_answer(
        text: String,
        cut_off: bool,
        tools: &[&str],
        turn_messages: &[Message],
    ) -> Screened {
        answer::screen(text, cut_off, tools, &answer::buddys_words(turn_messages))
    }

    /// Asks the model again for an answer its reply did not hold, within the turn's budget.
    pub(crate) fn reask(&mut self, why: Unanswered) -> Option<(&'static str, Trip)> {
        answer::reask(&self.policy, &mut self.memory, why)
    }

    // ExecuteTools.

    /// Opens a round for a reply with `text` beside its calls; `pending` are notes that
    /// wait for this round.
    pub(crate) fn begin_round(&mut self, text: &str, pending: Vec<String>) -> RoundJudge {
        RoundJudge::begin(self, text, pending)
    }

    /// Plans every call of the round (the gates of `gates.rs`); returns the slots and
    /// the trips to announce.
    pub(crate) fn plan_round(
        &mut self,
        round: &mut RoundJudge,
        calls: Vec<ToolCall>,
        semantics: &[Option<RepeatSemantics>],
        decisions: &mut HashMap<String, Decision>,
        facts: RoundFacts<'_>,
    ) -> (Vec<Slot>, Vec<Trip>) {
        round.plan(self, calls, semantics, decisions, facts)
    }

    /// For a `pollable` call that repeats an earlier action: what that action got back,
    /// so buddy can check again itself while the result stays the same (`poll.rs`).
    /// `None` for other calls, or when `poll_max_secs` is off.
    pub(crate) fn poll_watch(&self, slot: &Slot) -> Option<crate::calls::poll::PollWatch> {
        let budget = self.policy().poll_max_secs?;
        if slot.semantics != RepeatSemantics::Pollable {
            return None;
        }
        let seen = self.memory.log.results_for_key(&slot.key);
        (!seen.is_empty()).then(|| crate::calls::poll::PollWatch {
            seen,
            arg_strings: slot.arg_strings.clone(),
            budget: std::time::Duration::from_secs(budget),
        })
    }

    /// Books a call answered without running.
    pub(crate) fn not_run(round: &mut RoundJudge, slot: &Slot, content: &str, is_error: bool) {
        round.not_run(slot, content, is_error);
    }

    /// Books an executed call's outcome; returns the trips to announce before its result.
    pub(crate) fn observe(
        &mut self,
        round: &mut RoundJudge,
        slot: &Slot,
        outcome: &ToolOutcome,
    ) -> Vec<Trip> {
        round.observe(self, slot, outcome)
    }

    /// Closes a round: its notes, a fatal failure, or the cause that ends the turn.
    pub(crate) fn end_round(
        &mut self,
        round: RoundJudge,
        interrupted: bool,
        model_calls: u32,
        tools: &[&str],
    ) -> RoundVerdict {
        round.end(self, interrupted, model_calls, tools)
    }

    // Start: rounds that already happened (a client ran its tools).

    /// Opens a booked round.
    pub(crate) fn book_round(&mut self) -> RoundJudge {
        RoundJudge::booked(self)
    }

    /// Books one call of a booked round with the result that came with the request;
    /// returns the trips to announce.
    pub(crate) fn book_call(
        &mut self,
        round: &mut RoundJudge,
        call: ToolCall,
        content: &str,
        is_error: bool,
    ) -> Vec<Trip> {
        let slot = RoundJudge::slot(self, call, RepeatSemantics::Observed);
        self.memory.log.note_requested(&slot.key);
        round.observe(self, &slot, &booked_outcome(content, is_error))
    }

    /// Closes a booked round: the cause that ends the turn, if the round shows one.
    pub(crate) fn end_booked_round(&mut self, round: RoundJudge) -> Option<FinalizeCause> {
        round.end_booked(self)
    }

    // Finalize and End.

    /// Whether the money budget leaves room for one more call (the answer).
    pub(crate) fn affords_answer(&self, stats: &TurnStats, last_call: Option<Usd>) -> bool {
        limits::affords(&self.policy, stats, last_call, 1)
    }

    /// What becomes of the Finalize reply.
    pub(crate) fn check_final(
        text: String,
        instruction: &str,
        tools: &[&str],
        turn_messages: &[Message],
    ) -> FinalCheck {
        answer::check_final(text, instruction, tools, turn_messages)
    }

    /// The answer buddy writes from the tool results when the model gave none.
    pub(crate) fn fallback_answer(turn_messages: &[Message], reason: StopReason) -> String {
        answer::fallback_answer(turn_messages, reason)
    }
}
