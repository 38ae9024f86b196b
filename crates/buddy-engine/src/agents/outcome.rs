//! How a sub-agent ended, as the calling model reads it: typed, never "success" with an
//! empty answer, a capped child's answer marked partial.

use buddy_core::{StopReason, TurnStats, Usd};
use serde::{Deserialize, Serialize};

use crate::request::TurnOutcome;

/// How a sub-agent's turn ended, as [`AgentOutcome::of_turn`] reads it.
pub(crate) struct Ended<'a> {
    pub reason: StopReason,
    pub answer: Option<&'a str>,
    pub error: Option<&'a str>,
    pub stats: TurnStats,
}

impl<'a> From<&'a TurnOutcome> for Ended<'a> {
    fn from(turn: &'a TurnOutcome) -> Self {
        Ended {
            reason: turn.reason,
            answer: turn.answer.as_deref(),
            error: turn.error.as_deref(),
            stats: turn.stats,
        }
    }
}

/// What became of a delegation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    /// The sub-agent finished its task and answered.
    Answered,
    /// It answered from what it had when a limit or guard stopped it: partial.
    Partial,
    /// It sent nothing for `child_stall_secs` and was stopped; its work so far is returned.
    Stalled,
    /// It was cancelled with its caller (client cancel, deadline).
    Cancelled,
    /// It ended without an answer (provider error, a fatal skill, no answer at all).
    Failed,
    /// It was never started: a bound refused it (depth, spawns, budget, self-spawn).
    Refused,
}

/// The typed end of one sub-agent, which is the tool result its caller reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentOutcome {
    pub agent: String,
    pub status: AgentStatus,
    /// Why its turn ended (absent when it never started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// True when `answer` is not the finished work.
    pub partial: bool,
    /// Its answer, or its work so far, or why there is none.
    pub answer: String,
    pub model_calls: u32,
    /// Tool calls it made (named apart from the `tool_calls` of chat wire formats, so an
    /// answer that quotes an outcome is never taken for a call written as text).
    #[serde(rename = "tool_uses")]
    pub tool_calls: u32,
    pub tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<Usd>,
}

impl AgentOutcome {
    /// A delegation refused before it started, saying why.
    pub(crate) fn refused(agent: &str, why: String) -> Self {
        AgentOutcome {
            agent: agent.to_owned(),
            status: AgentStatus::Refused,
            stop_reason: None,
            partial: false,
            answer: why,
            model_calls: 0,
            tool_calls: 0,
            tokens: 0,
            cost_usd: None,
        }
    }

    /// The outcome of a sub-agent's turn; `so_far` is what it had said when it was
    /// stopped, and `stalled` whether the stall watch stopped it.
    pub(crate) fn of_turn(agent: &str, turn: Ended<'_>, so_far: &str, stalled: bool) -> Self {
        let answer = turn
            .answer
            .filter(|a| !a.trim().is_empty())
            .map(str::to_owned);
        let (status, answer) = match (turn.reason, answer) {
            _ if stalled => (AgentStatus::Stalled, work_so_far(so_far, "it went silent")),
            (StopReason::Cancelled, _) => (
                AgentStatus::Cancelled,
                work_so_far(so_far, "it was cancelled"),
            ),
            (StopReason::Completed | StopReason::FinishTool, Some(text)) => {
                (AgentStatus::Answered, text)
            }
            // Words buddy wrote for a turn that never reached its model are no answer.
            (reason, _) if turn.stats.model_calls == 0 => (
                AgentStatus::Failed,
                format!(
                    "the sub-agent ended ({reason}) before it made a model call{}",
                    turn.error.map(|e| format!(": {e}")).unwrap_or_default()
                ),
            ),
            (_, Some(text)) if turn.reason != StopReason::NoAnswer => (AgentStatus::Partial, text),
            (reason, text) => (
                AgentStatus::Failed,
                match (turn.error, text) {
                    (Some(error), _) => format!("the sub-agent failed ({reason}): {error}"),
                    (None, Some(text)) => format!(
                        "the sub-agent gave no answer of its own ({reason}); what it found: {text}"
                    ),
                    (None, None) => format!("the sub-agent ended without an answer ({reason})"),
                },
            ),
        };
        AgentOutcome {
            agent: agent.to_owned(),
            partial: !matches!(status, AgentStatus::Answered | AgentStatus::Failed),
            status,
            stop_reason: Some(turn.reason),
            answer,
            model_calls: turn.stats.model_calls,
            tool_calls: turn.stats.tool_calls,
            tokens: turn.stats.input_tokens + turn.stats.output_tokens,
            cost_usd: turn.stats.cost_usd,
        }
    }

    /// True for an outcome the caller should read as a failed call.
    pub fn is_error(&self) -> bool {
        matches!(
            self.status,
            AgentStatus::Failed
                | AgentStatus::Refused
                | AgentStatus::Cancelled
                | AgentStatus::Stalled
        )
    }

    /// The tool result the calling model reads: this outcome as one JSON object.
    pub fn to_result(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

/// A stopped sub-agent's work so far, or words saying there was none.
fn work_so_far(so_far: &str, why: &str) -> String {
    let so_far = so_far.trim();
    if so_far.is_empty() {
        format!("{why} before it had anything to report")
    } else {
        format!("{why}; its work so far: {so_far}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(reason: StopReason, answer: Option<&str>) -> Ended<'_> {
        Ended {
            reason,
            answer,
            error: None,
            stats: TurnStats {
                model_calls: 3,
                ..TurnStats::default()
            },
        }
    }

    #[test]
    fn a_child_that_never_reached_its_model_failed_whatever_buddy_wrote() {
        let mut ended = turn(
            StopReason::CostBudget,
            Some("I could not produce an answer"),
        );
        ended.stats.model_calls = 0;
        let o = AgentOutcome::of_turn("r", ended, "", false);
        assert_eq!(o.status, AgentStatus::Failed);
    }

    #[test]
    fn an_empty_completed_answer_is_a_failure_never_a_success() {
        let o = AgentOutcome::of_turn("r", turn(StopReason::Completed, Some("  ")), "", false);
        assert_eq!(o.status, AgentStatus::Failed);
        assert!(o.is_error());
    }

    #[test]
    fn a_capped_child_is_partial_and_a_stalled_one_keeps_its_work() {
        let capped = AgentOutcome::of_turn(
            "r",
            turn(StopReason::MaxModelCalls, Some("found two of three")),
            "",
            false,
        );
        assert_eq!(
            (capped.status, capped.partial),
            (AgentStatus::Partial, true)
        );
        assert!(!capped.is_error());
        let stalled =
            AgentOutcome::of_turn("r", turn(StopReason::Cancelled, None), "page 1 read", true);
        assert_eq!(stalled.status, AgentStatus::Stalled);
        assert!(stalled.answer.contains("page 1 read"));
        let done = AgentOutcome::of_turn("r", turn(StopReason::Completed, Some("42")), "", false);
        assert_eq!((done.status, done.partial), (AgentStatus::Answered, false));
        let json: serde_json::Value = serde_json::from_str(&done.to_result()).expect("json");
        assert_eq!(json["status"], "answered");
        assert_eq!(json["model_calls"], 3);
    }
}
