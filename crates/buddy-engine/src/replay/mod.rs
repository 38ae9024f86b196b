//! Replay: a recorded turn run again through the engine under another policy, without
//! calling the model or any tool — the recorded replies and results are played back —
//! and what happened set beside what the policy would have done: where it stops, with
//! which reason and evidence, and which guard trips differ. Where the policy would go on
//! past the end of the recording, the replay says so instead of inventing replies.

mod conversation;
mod judged;
mod playback;
mod streaks;
pub mod transcript;

use std::sync::Arc;

use buddy_core::{ChatEvent, Evidence, GuardAction, GuardKind, Message, StopReason};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use tracing::instrument::WithSubscriber;

pub use conversation::{LoggedConversation, LoggedTurn, NO_RESULT, Repairs, turns_of};
pub use judged::{
    Intervention, JudgeError, LONG_LOOP_REPEATS, LOOP_REPEATS, Outcome, Repeats, RunJudgement,
    StopPoint, judge_conversation,
};
pub use playback::{Beyond, TapeError, Wanted};

use crate::approval::Resume;
use crate::engine::Engine;
use crate::policy::LoopPolicy;
use crate::request::TurnRequest;
use crate::tape::{Recording, Tape, TapeEntry, TapeStep};

/// A guard trip, and the model calls made when it happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TripAt {
    pub guard: GuardKind,
    pub action: GuardAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    pub model_call: u32,
}

impl std::fmt::Display for TripAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.guard.as_str(), self.action.as_str())?;
        if let Some(skill) = &self.skill {
            write!(f, " [{skill}]")?;
        }
        write!(f, " after call {}", self.model_call)
    }
}

/// How a turn ended, recorded or replayed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// The stop reason; `None` when a replay left the recording before the turn ended.
    pub reason: Option<StopReason>,
    pub model_calls: u32,
    pub tool_calls: u32,
    pub trips: Vec<TripAt>,
    /// The ids of the calls that ran, in order.
    pub calls: Vec<String>,
    /// The guard that sent the turn to Finalize, with its detail and evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<StoppedBy>,
}

/// The guard behind a Finalize (or an `on_limit = "error"` end).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoppedBy {
    pub guard: GuardKind,
    pub detail: String,
    pub evidence: Vec<Evidence>,
}

/// A recorded turn beside its replay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub recorded: Side,
    pub replayed: Side,
    /// Where the replay left the recording, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beyond: Option<Beyond>,
    /// The policy the replay ran under.
    pub policy: LoopPolicy,
    /// True when the replay stopped where the recording did, for the same reason, after
    /// the same calls.
    pub same_stop: bool,
    /// Trips that happened in only one of the two.
    pub only_recorded: Vec<TripAt>,
    pub only_replayed: Vec<TripAt>,
    /// What the replay could not reproduce (a deadline, instructions not stored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caveats: Vec<String>,
}

/// Replays `recording` under `policy` (`None`: the policy it ran with).
pub async fn replay(
    recording: &Recording,
    policy: Option<LoopPolicy>,
) -> Result<Comparison, TapeError> {
    let tape = &recording.tape;
    let mut caveats = Vec::new();
    let mut policy = policy.unwrap_or_else(|| tape.policy.clone());
    if policy.deadline_ms.take().is_some() {
        caveats.push("deadline_ms is wall-clock time, which a replay does not simulate".to_owned());
    }
    // buddy's own checks of a repeated pollable call are in the record already: the result
    // recorded is the one they ended with. A replay plays it back, it never waits on time.
    policy.poll_max_secs = None;
    if recording.history.len() != tape.given {
        caveats.push(format!(
            "the turn's request had {} message(s) before it, the stored conversation {} (a Responses \
             `instructions` prompt is not stored)",
            tape.given,
            recording.history.len()
        ));
    }
    let cancel = CancellationToken::new();
    let shared = playback::Shared::new(cancel.clone());
    let (model, tools) = playback::playback(tape, &recording.new_messages, &shared)?;
    let engine = Engine::new(Arc::new(model), Arc::new(tools));
    let mut request = TurnRequest::new(tape.model.clone(), String::new())
        .with_history(recording.history.clone())
        .with_policy(policy.clone())
        .with_cancel(cancel)
        .with_approval(tape.approval.clone())
        .with_tasks(None, tape.resumed.clone().into_iter().collect());
    request.user_message = None;
    match &tape.entry {
        TapeEntry::NewMessage { user_at: Some(at) } => {
            request.user_message = Some(
                recording
                    .new_messages
                    .get(*at)
                    .and_then(Message::text)
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
        TapeEntry::NewMessage { user_at: None } | TapeEntry::ClientResults => {}
        TapeEntry::Decisions { decisions } => {
            request.resume = Some(Resume::Decisions(decisions.clone()));
        }
        TapeEntry::Continue => request.resume = Some(Resume::Continue),
    }
    // The engine's own logs are about the playback's edges, not news: keep them quiet.
    let (events, outcome) = engine
        .run_collect(request)
        .with_subscriber(tracing::subscriber::NoSubscriber::default())
        .await;
    let beyond = shared.finish();
    let recorded = side_of(tape, events_free_stop(tape));
    let mut replayed = side_of(&outcome.tape, stopped_by(&events));
    if let Some(b) = &beyond {
        // What the replay did after it left the recording is not the policy's doing. A
        // turn that asks for its final answer there has stopped, and why is known; the
        // answer itself is beyond the recording.
        replayed
            .trips
            .retain(|t| t.model_call <= b.after_model_call);
        if b.wanted == Wanted::FinalAnswer {
            replayed.model_calls = b.after_model_call + 1;
        } else {
            replayed.reason = None;
            replayed.stopped_by = None;
            replayed.model_calls = b.after_model_call;
        }
        replayed.tool_calls = u32::try_from(replayed.calls.len()).unwrap_or(u32::MAX);
    }
    let only_recorded = difference(&recorded.trips, &replayed.trips);
    let only_replayed = difference(&replayed.trips, &recorded.trips);
    let same_stop = recorded.reason == replayed.reason
        && recorded.model_calls == replayed.model_calls
        && recorded.calls == replayed.calls;
    Ok(Comparison {
        recorded,
        replayed,
        beyond,
        policy,
        same_stop,
        only_recorded,
        only_replayed,
        caveats,
    })
}

/// The recorded end's guard, from the trips the tape keeps.
fn events_free_stop(tape: &Tape) -> Option<StoppedBy> {
    tape.steps.iter().rev().find_map(|s| match s {
        TapeStep::Trip {
            guard,
            action: GuardAction::Finalize | GuardAction::Error,
            detail,
            evidence,
            ..
        } => Some(StoppedBy {
            guard: *guard,
            detail: detail.clone(),
            evidence: evidence.clone(),
        }),
        _ => None,
    })
}

/// A side from a tape (the replay's own tape records what it did).
fn side_of(tape: &Tape, stopped_by: Option<StoppedBy>) -> Side {
    let mut trips = Vec::new();
    let mut calls = Vec::new();
    for step in &tape.steps {
        match step {
            TapeStep::Trip {
                guard,
                action,
                skill,
                model_call,
                ..
            } => trips.push(TripAt {
                guard: *guard,
                action: *action,
                skill: skill.clone(),
                model_call: *model_call,
            }),
            TapeStep::Result { call_id, .. } => calls.push(call_id.clone()),
            _ => {}
        }
    }
    let (reason, model_calls, tool_calls) = match &tape.ended {
        Some(end) => (Some(end.reason), end.model_calls, end.tool_calls),
        None => (None, 0, 0),
    };
    Side {
        reason,
        model_calls,
        tool_calls,
        trips,
        calls,
        stopped_by,
    }
}

/// The guard that finalized a replayed turn, from its events (with detail and evidence).
fn stopped_by(events: &[ChatEvent]) -> Option<StoppedBy> {
    events.iter().rev().find_map(|e| match e {
        ChatEvent::GuardTripped {
            guard,
            action: GuardAction::Finalize | GuardAction::Error,
            detail,
            evidence,
            ..
        } => Some(StoppedBy {
            guard: *guard,
            detail: detail.clone(),
            evidence: evidence.clone(),
        }),
        _ => None,
    })
}

/// Trips of `a` that `b` does not have (each of `b`'s matches one of `a`'s at most).
fn difference(a: &[TripAt], b: &[TripAt]) -> Vec<TripAt> {
    let mut left: Vec<&TripAt> = b.iter().collect();
    a.iter()
        .filter(|trip| match left.iter().position(|t| t == trip) {
            Some(i) => {
                left.remove(i);
                false
            }
            None => true,
        })
        .cloned()
        .collect()
}
