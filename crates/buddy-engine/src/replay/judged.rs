//! Judging a recorded conversation of any agent: every turn replayed through buddy under a
//! policy, nothing executed, and set beside what the agent did — where buddy would have
//! stopped it (and with which guard and evidence), where it would only have changed what
//! the model read, and where it would have let it be. This is how a team tells whether
//! buddy would save or break the agent it runs today (`buddy judge`).

use std::collections::{HashMap, HashSet};

use buddy_core::{Evidence, GuardAction, GuardKind, Message, StopReason, ToolSpec};
use serde::{Deserialize, Serialize};

use super::conversation::{LoggedTurn, Repairs, turns_of};
pub use super::streaks::{LONG_LOOP_REPEATS, LOOP_REPEATS, Repeats};
use super::streaks::{LoggedCall, repeats_of};
use super::{Comparison, TripAt, Wanted, replay};
use crate::guards::canonical::canonical_args;
use crate::policy::LoopPolicy;

/// What buddy would have done to a run, from the least to the most.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Nothing: every reply and result reached the model as recorded.
    Untouched,
    /// Notes only (a warning beside a result); nothing withheld.
    Warned,
    /// Some call was not run (answered from its earlier result, refused, its tool
    /// withdrawn), or the model was asked again for its answer, or a reply's repeated
    /// tail was cut: the model would have read something else, but the turn went on (or
    /// its answer stood).
    Altered,
    /// The agent's final answer was replaced by one buddy wrote.
    AnswerRejected,
    /// buddy ended a turn before the agent did.
    Stopped,
}

impl Outcome {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Untouched => "untouched",
            Outcome::Warned => "warned",
            Outcome::Altered => "altered",
            Outcome::AnswerRejected => "answer_rejected",
            Outcome::Stopped => "stopped",
        }
    }

    /// True when the run as recorded would not have reached its end: a stop, or its
    /// answer not taken. On a solved run this is a false stop.
    pub fn breaks_run(self) -> bool {
        self >= Outcome::AnswerRejected
    }
}

/// Where buddy would have ended a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopPoint {
    /// The turn (1-based) of the conversation.
    pub turn: u32,
    /// Model calls of the whole run made when buddy stopped (its Finalize call not counted).
    pub after_model_call: u32,
    /// Model calls the run made in all.
    pub of_model_calls: u32,
    pub reason: Option<StopReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<GuardKind>,
    pub detail: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
}

/// One thing a guard did during the replay of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intervention {
    pub turn: u32,
    /// Model calls of the whole run made when it happened.
    pub model_call: u32,
    pub guard: GuardKind,
    pub action: GuardAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
}

/// How buddy would have treated one recorded run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunJudgement {
    pub outcome: Outcome,
    /// Turns replayed (user messages that got replies, and replies that went on after an
    /// answer).
    pub turns: u32,
    /// Model replies and tool calls the run holds.
    pub model_calls: u32,
    pub tool_calls: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopPoint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interventions: Vec<Intervention>,
    /// The run's longest streak of identical calls.
    pub repeats: Repeats,
    /// Model calls (and tool calls) the recording made after the point where buddy stopped
    /// the turn, less buddy's own Finalize call.
    pub model_calls_saved: u32,
    pub tool_calls_saved: u32,
    /// New actions (calls whose tool and arguments the turn had not made) the recording
    /// made after buddy's stop: the work a stop would have lost. A stop in the middle of
    /// a loop that the agent never left loses none.
    #[serde(default)]
    pub actions_lost: u32,
    #[serde(default, skip_serializing_if = "Repairs::is_empty")]
    pub repairs: Repairs,
}

impl RunJudgement {
    /// For a run that repeats one call [`LOOP_REPEATS`] times in a row: whether buddy
    /// stops it by the reply that made the last of them (or runs them once, when one
    /// reply asked for them all).
    pub fn loop_caught(&self) -> Option<bool> {
        let fifth = self.repeats.fifth_at_model_call?;
        Some(
            self.repeats.in_one_reply
                || self
                    .stop
                    .as_ref()
                    .is_some_and(|s| s.after_model_call <= fifth),
        )
    }

    /// For a run that repeats one call [`LONG_LOOP_REPEATS`] times in a row with nothing
    /// new: whether buddy ends it by the reply that made the last of them (or runs them
    /// once, when one reply asked for them all).
    pub fn long_loop_ended(&self) -> Option<bool> {
        let eighth = self.repeats.eighth_at_model_call?;
        if !self.repeats.nothing_new {
            return None;
        }
        Some(
            self.repeats.eighth_in_one_reply
                || self
                    .stop
                    .as_ref()
                    .is_some_and(|s| s.after_model_call <= eighth),
        )
    }

    /// Whether buddy would have warned the model (a note beside a result) in this run.
    pub fn warned(&self) -> bool {
        self.interventions
            .iter()
            .any(|i| i.action == GuardAction::Warned)
    }
}

/// Why a run could not be judged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JudgeError {
    #[error("the conversation has no model reply, so nothing to judge")]
    NoReply,
    #[error("turn {turn} could not be replayed: {message}")]
    Replay { turn: u32, message: String },
}

/// Judges the recorded conversation `messages` of `model` (with the `tools` it was
/// offered, when the log names them) under `policy`, executing nothing. The context window
/// is the recorded run's own business: unless `policy` sets one, it is taken as unlimited.
pub async fn judge_conversation(
    model: &str,
    messages: Vec<Message>,
    tools: &[ToolSpec],
    policy: &LoopPolicy,
) -> Result<RunJudgement, JudgeError> {
    let mut policy = policy.clone();
    policy.context_window.get_or_insert(100_000_000);
    let conversation = turns_of(model, messages, tools, &policy);
    if conversation.turns.is_empty() {
        return Err(JudgeError::NoReply);
    }
    let mut judgement = RunJudgement {
        outcome: Outcome::Untouched,
        turns: u32::try_from(conversation.turns.len()).unwrap_or(u32::MAX),
        model_calls: 0,
        tool_calls: 0,
        stop: None,
        interventions: Vec::new(),
        repeats: Repeats::default(),
        model_calls_saved: 0,
        tool_calls_saved: 0,
        actions_lost: 0,
        repairs: conversation.repairs.clone(),
    };
    let mut before = 0u32;
    for (number, turn) in (1u32..).zip(&conversation.turns) {
        let comparison = replay(&turn.recording, Some(policy.clone()))
            .await
            .map_err(|e| JudgeError::Replay {
                turn: number,
                message: e.to_string(),
            })?;
        let calls = calls_of(turn);
        let seen = judge_turn(number, before, turn, &calls, &comparison)?;
        judgement.outcome = judgement.outcome.max(seen.outcome);
        judgement.interventions.extend(seen.interventions);
        if judgement.stop.is_none()
            && let Some(stop) = seen.stop
        {
            judgement.model_calls_saved = seen.model_calls_saved;
            judgement.tool_calls_saved = seen.tool_calls_saved;
            judgement.actions_lost = seen.actions_lost;
            judgement.stop = Some(stop);
        }
        let repeats = repeats_of(&calls, before);
        if repeats.calls > judgement.repeats.calls {
            judgement.repeats = repeats;
        }
        judgement.tool_calls += calls.len() as u32;
        before += turn.replies;
    }
    judgement.model_calls = before;
    if let Some(stop) = &mut judgement.stop {
        stop.of_model_calls = before;
    }
    Ok(judgement)
}

/// What one turn's replay says.
struct TurnSeen {
    outcome: Outcome,
    stop: Option<StopPoint>,
    interventions: Vec<Intervention>,
    model_calls_saved: u32,
    tool_calls_saved: u32,
    actions_lost: u32,
}

/// Sets the replay of `turn` (the `number`th; `before` model calls were made before it)
/// beside the recording.
fn judge_turn(
    number: u32,
    before: u32,
    turn: &LoggedTurn,
    calls: &[LoggedCall<'_>],
    comparison: &Comparison,
) -> Result<TurnSeen, JudgeError> {
    let replayed = &comparison.replayed;
    if replayed.reason == Some(StopReason::InvalidRequest) {
        return Err(JudgeError::Replay {
            turn: number,
            message: replayed.stopped_by.as_ref().map_or_else(
                || "buddy refused the history".to_owned(),
                |s| s.detail.clone(),
            ),
        });
    }
    let interventions: Vec<Intervention> = replayed
        .trips
        .iter()
        .map(|t: &TripAt| Intervention {
            turn: number,
            model_call: before + t.model_call,
            guard: t.guard,
            action: t.action,
            skill: t.skill.clone(),
        })
        .collect();
    let n = turn.replies;
    // Where the replay ended, and whether buddy ended it there (a Finalize call, or an
    // end of its own) rather than running out of recording.
    let (ended_after, buddy_ended) = match &comparison.beyond {
        Some(b) => (b.after_model_call, b.wanted == Wanted::FinalAnswer),
        None => (
            replayed.model_calls,
            replayed.reason != Some(StopReason::Completed),
        ),
    };
    // An answer buddy replaced with its own loses what the agent said (an empty reply
    // replaced loses nothing). Asking again, or cutting a reply's repeated tail, keeps
    // the turn going or the answer standing: that changes what happened, and is counted
    // so, without breaking the run.
    let answer_replaced = interventions
        .iter()
        .any(|i| i.action == GuardAction::ComposedAnswer)
        && last_reply_text(turn).is_some_and(|t| !t.trim().is_empty());
    let outcome = if buddy_ended && ended_after < n {
        Outcome::Stopped
    } else if answer_replaced {
        Outcome::AnswerRejected
    } else if interventions.iter().any(|i| altering(i.action)) {
        Outcome::Altered
    } else if interventions.is_empty() {
        Outcome::Untouched
    } else {
        Outcome::Warned
    };
    // A Finalize after the recording's last round stops nothing the agent did, but it is
    // where buddy would have ended the turn (a loop caught at its end).
    let stop = (buddy_ended && ended_after <= n).then(|| StopPoint {
        turn: number,
        after_model_call: before + ended_after,
        of_model_calls: 0,
        reason: replayed.reason,
        guard: replayed.stopped_by.as_ref().map(|s| s.guard),
        detail: replayed
            .stopped_by
            .as_ref()
            .map(|s| s.detail.clone())
            .unwrap_or_default(),
        evidence: replayed
            .stopped_by
            .as_ref()
            .map(|s| s.evidence.clone())
            .unwrap_or_default(),
    });
    let (model_calls_saved, tool_calls_saved, actions_lost) = match &stop {
        Some(_) if ended_after < n => {
            let (later, new) = calls_after(calls, ended_after);
            // buddy's own Finalize call is one more model call.
            ((n - ended_after).saturating_sub(1), later, new)
        }
        _ => (0, 0, 0),
    };
    Ok(TurnSeen {
        outcome,
        stop,
        interventions,
        model_calls_saved,
        tool_calls_saved,
        actions_lost,
    })
}

/// Guard actions that change what the model reads about its calls.
fn altering(action: GuardAction) -> bool {
    matches!(
        action,
        GuardAction::ReturnedEarlierResult
            | GuardAction::Refused
            | GuardAction::WithdrewSkill
            | GuardAction::WithdrewAllTools
            | GuardAction::AcceptedAnswer
            | GuardAction::AskedAgain
            | GuardAction::CutReply
            | GuardAction::Finalize
            | GuardAction::Error
    )
}

/// Every call of the turn, in order.
fn calls_of(turn: &LoggedTurn) -> Vec<LoggedCall<'_>> {
    let messages = &turn.recording.new_messages;
    let results: HashMap<&str, &str> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => Some((tool_call_id.as_str(), content.as_str())),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    let mut reply = 0u32;
    for message in messages {
        if let Message::Assistant { tool_calls, .. } = message {
            reply += 1;
            out.extend(tool_calls.iter().map(|call| LoggedCall {
                reply,
                call,
                result: results.get(call.id.as_str()).copied(),
                action: (call.name.as_str(), canonical_args(&call.arguments)),
            }));
        }
    }
    out
}

/// The text of the turn's last reply.
fn last_reply_text(turn: &LoggedTurn) -> Option<&str> {
    turn.recording
        .new_messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Assistant { content, .. } => Some(content.as_deref().unwrap_or_default()),
            _ => None,
        })
}

/// Tool calls the turn made in replies after its `after`th, and how many of them were new
/// actions (a tool and arguments the turn had not called before).
fn calls_after(calls: &[LoggedCall<'_>], after: u32) -> (u32, u32) {
    let mut seen = HashSet::new();
    let (mut later, mut new) = (0, 0);
    for c in calls {
        let fresh = seen.insert(&c.action);
        if c.reply > after {
            later += 1;
            new += u32::from(fresh);
        }
    }
    (later, new)
}

#[cfg(test)]
mod tests {
    use buddy_core::{Message, ToolCall};

    use super::*;

    /// A log: the user asks, the agent makes `calls` (name, arguments, result) one reply
    /// each, then answers `answer`.
    fn log(calls: &[(&str, &str, &str)], answer: &str) -> Vec<Message> {
        let mut messages = vec![Message::system("You are an agent."), Message::user("do it")];
        for (i, (name, args, result)) in calls.iter().enumerate() {
            let id = format!("c{i}");
            messages.push(Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall::new(&id, *name, *args)],
            });
            messages.push(Message::tool_result(id, *result, false));
        }
        messages.push(Message::assistant(answer));
        messages
    }

    async fn judge(messages: Vec<Message>) -> RunJudgement {
        judge_conversation("recorded", messages, &[], &LoopPolicy::default())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn new_commands_with_empty_output_are_left_alone() {
        let calls: Vec<(&str, String, &str)> = (0..30)
            .map(|i| ("bash", format!(r#"{{"command":"mkdir dir_{i}"}}"#), ""))
            .collect();
        let calls: Vec<(&str, &str, &str)> =
            calls.iter().map(|(n, a, r)| (*n, a.as_str(), *r)).collect();
        let j = judge(log(&calls, "Done: 30 folders.")).await;
        assert_eq!(j.outcome, Outcome::Untouched, "{j:?}");
        assert_eq!((j.model_calls, j.tool_calls, j.turns), (31, 30, 1));
        assert_eq!(j.stop, None);
    }

    #[tokio::test]
    async fn a_loop_is_warned_at_its_fifth_call_stopped_by_its_eighth_and_a_stop_that_loses_work_says_so()
     {
        let same = (
            "bash",
            r#"{"command":"javac Test.java"}"#,
            "javac: command not found",
        );
        let j = judge(log(&[same; 10], "It fails.")).await;
        assert_eq!(j.outcome, Outcome::Stopped);
        assert!(j.warned());
        assert_eq!(
            j.interventions[0].model_call, 5,
            "the fifth is warned: {:?}",
            j.interventions
        );
        let stop = j.stop.as_ref().unwrap();
        assert_eq!(
            (stop.after_model_call, stop.of_model_calls, stop.guard),
            (8, 11, Some(GuardKind::Repetition))
        );
        assert_eq!(stop.evidence.len(), 2, "{stop:?}");
        assert_eq!(j.repeats.calls, 10);
        assert!(j.repeats.same_result && j.repeats.nothing_new);
        assert_eq!(
            j.loop_caught(),
            Some(false),
            "no longer stopped at the fifth"
        );
        assert_eq!(j.long_loop_ended(), Some(true));
        assert_eq!(
            (j.model_calls_saved, j.actions_lost),
            (2, 0),
            "only the loop was left"
        );

        let mut calls = vec![same; 6];
        calls.push(("bash", r#"{"command":"apt install default-jdk"}"#, "ok"));
        let j = judge(log(&calls, "Installed.")).await;
        assert_eq!(j.outcome, Outcome::Warned, "warned, then changed course");
        assert_eq!(j.stop, None);

        let mut calls = vec![same; 8];
        calls.push(("bash", r#"{"command":"apt install default-jdk"}"#, "ok"));
        let j = judge(log(&calls, "Installed.")).await;
        assert_eq!(j.outcome, Outcome::Stopped);
        assert_eq!(j.actions_lost, 1, "the install came after the stop");
    }

    #[tokio::test]
    async fn an_empty_answer_asked_again_alters_but_does_not_break_the_run() {
        let j = judge(log(&[("get_time", "{}", "12:00")], "")).await;
        assert_eq!(j.outcome, Outcome::Altered, "{j:?}");
        assert!(!j.outcome.breaks_run());
        assert!(
            j.interventions
                .iter()
                .any(|i| i.action == GuardAction::AskedAgain)
        );
    }

    #[tokio::test]
    async fn a_log_with_no_user_message_is_one_turn_and_one_with_no_reply_is_refused() {
        let mut messages = log(&[("ls", "{}", "a b")], "Two files.");
        messages.remove(1);
        let j = judge(messages).await;
        assert_eq!((j.turns, j.outcome), (1, Outcome::Untouched));
        assert!(j.repairs.added_user_message);
        let refused = judge_conversation(
            "recorded",
            vec![Message::user("hi")],
            &[],
            &LoopPolicy::default(),
        )
        .await;
        assert_eq!(refused, Err(JudgeError::NoReply));
    }
}
