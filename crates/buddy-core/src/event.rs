use serde::{Deserialize, Serialize};

use crate::{Arguments, FinishReason, StopReason, TurnStats};

/// Everything a turn reports, in order. The CLI printer, the SSE server and the
/// OpenAI facade are all consumers of this one stream.
///
/// A turn emits exactly one terminal event (`Done` or `Error`), and it is the last.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChatEvent {
    /// A fragment of model text, as it streams.
    TextDelta { text: String },
    /// The engine is about to run (or answer) a tool call the model made.
    ToolCallStart {
        id: String,
        name: String,
        arguments: Arguments,
    },
    /// The result the model will see for a tool call.
    ToolCallResult {
        id: String,
        name: String,
        content: String,
        is_error: bool,
    },
    /// A `pollable` call returned the same result as before: buddy waits `wait_ms` and
    /// checks it again itself (check number `check`), without a model call.
    ToolPolling {
        id: String,
        name: String,
        check: u32,
        wait_ms: u64,
        /// How long buddy has waited on this call so far.
        waited_ms: u64,
    },
    /// A running call's progress (an MCP server's `notifications/progress`, or the
    /// status of the task behind it): its latest values, at most a few a second per
    /// call, the last always sent before the call's result. Not part of the history.
    ToolProgress {
        id: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        progress: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        /// The status of the task running the call (`working`, `input_required`, …).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
    },
    /// While call `id` ran, its MCP server asked buddy's model for a completion
    /// (sampling): one model call drawn from the turn's budget and counted in its stats,
    /// or `refused` (why) when the turn had none left.
    ToolSampling {
        id: String,
        name: String,
        server: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        input_tokens: u64,
        output_tokens: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<crate::Usd>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
    },
    /// A tool (an MCP server) asks the person for values while call `call_id` runs: the
    /// call waits for the answer to request `id` (`schema` is the form to show, its
    /// fields in `order`: the asker's, which `schema`'s sorted map loses).
    ElicitationRequired {
        id: String,
        call_id: String,
        server: String,
        message: String,
        schema: serde_json::Value,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        order: Vec<String>,
    },
    /// Request `id` was answered (`accept`, `decline` or `cancel`, by the person, the
    /// policy or its timeout): the form can go. `unattended` says, when nobody could be
    /// asked, what was asked and which setting answered instead.
    ElicitationResolved {
        id: String,
        action: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unattended: Option<String>,
    },
    /// A limit or loop guard acted; `detail` says why in words.
    GuardTripped {
        guard: GuardKind,
        action: GuardAction,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skill: Option<String>,
        detail: String,
        /// The calls (and their results) that made the guard act, oldest first.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evidence: Vec<Evidence>,
    },
    /// One model call finished: what it returned and what the turn has used so far.
    IterationStats {
        model_call: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        finish_reason: Option<FinishReason>,
        tool_calls_requested: u32,
        tools_offered: u32,
        input_tokens: u64,
        output_tokens: u64,
        /// Tokens of this call's request (messages and tools): the provider's own count
        /// when its reply reports usage (a reported 0 is taken as none), else buddy's count.
        context_tokens: u64,
        /// The model's context window, so a client can show how full it is.
        context_window: u64,
        elapsed_ms: u64,
        /// What this call cost, in dollars (absent when the model's price is unknown).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<crate::Usd>,
    },
    /// The model called tools that need a person's approval; the turn ends
    /// `approval_required` next, and none of the reply's calls has run.
    ApprovalRequired { calls: Vec<PendingCall> },
    /// The turn's recording (its tape and messages), which `buddy replay` plays back.
    /// The engine never emits it; `buddy run --json` writes it just before the terminal
    /// event so that its output can be replayed.
    Recording { recording: serde_json::Value },
    /// An event of a sub-agent's turn, passed up to the top-level stream: `path` names
    /// each delegation from the top-level turn down to the agent that emitted `event`.
    Agent {
        path: Vec<AgentHop>,
        event: Box<ChatEvent>,
    },
    /// The turn ended with an answer (possibly written by buddy when the model gave none).
    Done {
        reason: StopReason,
        answer: String,
        stats: TurnStats,
    },
    /// The turn ended without an answer.
    Error {
        reason: StopReason,
        message: String,
        stats: TurnStats,
    },
}

impl ChatEvent {
    /// True for `Done` and `Error`, the events that end a turn.
    pub fn is_terminal(&self) -> bool {
        matches!(self, ChatEvent::Done { .. } | ChatEvent::Error { .. })
    }

    /// The event's `type` tag, also used as its SSE event name.
    pub fn kind(&self) -> &'static str {
        match self {
            ChatEvent::TextDelta { .. } => "text_delta",
            ChatEvent::ToolCallStart { .. } => "tool_call_start",
            ChatEvent::ToolCallResult { .. } => "tool_call_result",
            ChatEvent::ToolPolling { .. } => "tool_polling",
            ChatEvent::ToolProgress { .. } => "tool_progress",
            ChatEvent::ToolSampling { .. } => "tool_sampling",
            ChatEvent::ElicitationRequired { .. } => "elicitation_required",
            ChatEvent::ElicitationResolved { .. } => "elicitation_resolved",
            ChatEvent::GuardTripped { .. } => "guard_tripped",
            ChatEvent::IterationStats { .. } => "iteration_stats",
            ChatEvent::ApprovalRequired { .. } => "approval_required",
            ChatEvent::Recording { .. } => "recording",
            ChatEvent::Agent { .. } => "agent",
            ChatEvent::Done { .. } => "done",
            ChatEvent::Error { .. } => "error",
        }
    }
}

/// One step of a delegation: the sub-agent `agent`, started by the tool call `call_id`
/// of the turn above it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentHop {
    pub agent: String,
    pub call_id: String,
}

/// A tool call waiting for a person's decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingCall {
    pub id: String,
    pub name: String,
    pub arguments: Arguments,
    /// Why it needs approval, in words for the person asked.
    pub why: String,
}

/// One call a guard judged, with the start of its result: what a user needs to see why
/// the guard acted, or to report a false positive precisely.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub call_id: String,
    pub name: String,
    pub arguments: String,
    /// The start of the result the call got (at most [`Evidence::EXCERPT_CHARS`] characters).
    pub result: String,
}

impl Evidence {
    /// Longest result excerpt kept in an event.
    pub const EXCERPT_CHARS: usize = 200;
    /// Longest arguments excerpt kept in an event (an event names the call; the
    /// history holds its arguments whole).
    pub const ARGUMENTS_CHARS: usize = 1000;

    /// Evidence for one call, its result and arguments cut to their excerpt lengths.
    pub fn new(call_id: &str, name: &str, arguments: &str, result: &str) -> Self {
        Evidence {
            call_id: call_id.to_owned(),
            name: name.to_owned(),
            arguments: Self::arguments_excerpt(arguments),
            result: excerpt(result, Self::EXCERPT_CHARS),
        }
    }

    /// The arguments as evidence keeps them (at most [`Evidence::ARGUMENTS_CHARS`]).
    pub fn arguments_excerpt(arguments: &str) -> String {
        excerpt(arguments, Self::ARGUMENTS_CHARS)
    }
}

/// Which guard acted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GuardKind {
    ModelCallLimit,
    ToolCallLimit,
    SkillCallLimit,
    CircuitBreaker,
    Repetition,
    Cycle,
    NearDuplicate,
    RepeatedAnswer,
    WithdrawnSkillCalled,
    SubstantiveAnswer,
    HonorStop,
    ToolsWithdrawn,
    TokenBudget,
    /// The turn's money budget would be passed by another model call.
    CostBudget,
    Deadline,
    /// The history was trimmed to fit the context window.
    ContextWindow,
    /// Guard trips on any skills added up to the turn's budget of trips.
    TripBudget,
    /// The model's reply repeated the same text over and over.
    RepetitiveOutput,
    /// A reply that would end the turn was empty, only reasoning, cut off, echoed buddy's
    /// words, or wrote a tool call as text.
    FinalAnswerCheck,
    /// Several rounds in a row in which no call ran anew: every call was refused,
    /// withdrawn, or repeated an earlier one and got the same result back.
    NoProgress,
    /// Tools were offered, yet the model wrote a tool call as text: the model server
    /// probably ignores `tools` (a compat switch may be missing; `buddy doctor` checks).
    ToolsIgnored,
    /// A call needed a person's approval that no one could give (an unattended run).
    Approval,
    /// The model server refused the conversation for repeating tool calls.
    ProviderLoopRefusal,
    /// A sub-agent bound acted: depth, spawns per turn, a self-spawn, a stalled child,
    /// or the tree's shared budget.
    Delegation,
}

impl GuardKind {
    /// The snake_case name used in events and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            GuardKind::ModelCallLimit => "model_call_limit",
            GuardKind::ToolCallLimit => "tool_call_limit",
            GuardKind::SkillCallLimit => "skill_call_limit",
            GuardKind::CircuitBreaker => "circuit_breaker",
            GuardKind::Repetition => "repetition",
            GuardKind::Cycle => "cycle",
            GuardKind::NearDuplicate => "near_duplicate",
            GuardKind::RepeatedAnswer => "repeated_answer",
            GuardKind::WithdrawnSkillCalled => "withdrawn_skill_called",
            GuardKind::SubstantiveAnswer => "substantive_answer",
            GuardKind::HonorStop => "honor_stop",
            GuardKind::ToolsWithdrawn => "tools_withdrawn",
            GuardKind::TokenBudget => "token_budget",
            GuardKind::CostBudget => "cost_budget",
            GuardKind::Deadline => "deadline",
            GuardKind::ContextWindow => "context_window",
            GuardKind::TripBudget => "trip_budget",
            GuardKind::RepetitiveOutput => "repetitive_output",
            GuardKind::FinalAnswerCheck => "final_answer_check",
            GuardKind::NoProgress => "no_progress",
            GuardKind::ToolsIgnored => "tools_ignored",
            GuardKind::Approval => "approval",
            GuardKind::ProviderLoopRefusal => "provider_loop_refusal",
            GuardKind::Delegation => "delegation",
        }
    }
}

/// What the guard did about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GuardAction {
    /// The call was not run; the earlier result was returned with a note.
    ReturnedEarlierResult,
    /// The call ran; its result carries a warning note for the model.
    Warned,
    /// The call was not run and got an error result saying why.
    Refused,
    /// The skill is no longer offered for the rest of the turn.
    WithdrewSkill,
    /// No tools are offered for the rest of the turn.
    WithdrewAllTools,
    /// The model is asked once more, without tools, to answer from what it has.
    Finalize,
    /// The turn ends with an error (policy `on_limit = "error"`).
    Error,
    /// The text beside the tool calls was taken as the final answer.
    AcceptedAnswer,
    /// Older messages were left out of the request, or long results cut, to fit.
    Trimmed,
    /// The model's reply was cut off before its end.
    CutReply,
    /// buddy wrote the answer from the tool results instead of the model's reply.
    ComposedAnswer,
    /// The reply held no answer; the model was asked again with a short note.
    AskedAgain,
    /// Parts the request could do without were left out so that it fits the window.
    Shed,
    /// A sub-agent was stopped (it went silent) and its work so far returned.
    StoppedAgent,
}

impl GuardAction {
    /// The snake_case name used in events and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            GuardAction::ReturnedEarlierResult => "returned_earlier_result",
            GuardAction::Warned => "warned",
            GuardAction::Refused => "refused",
            GuardAction::WithdrewSkill => "withdrew_skill",
            GuardAction::WithdrewAllTools => "withdrew_all_tools",
            GuardAction::Finalize => "finalize",
            GuardAction::Error => "error",
            GuardAction::AcceptedAnswer => "accepted_answer",
            GuardAction::Trimmed => "trimmed",
            GuardAction::CutReply => "cut_reply",
            GuardAction::ComposedAnswer => "composed_answer",
            GuardAction::AskedAgain => "asked_again",
            GuardAction::Shed => "shed",
            GuardAction::StoppedAgent => "stopped_agent",
        }
    }
}

/// The first `chars` characters of `text`, with `…` when it was longer.
fn excerpt(text: &str, chars: usize) -> String {
    let mut out: String = text.chars().take(chars).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_a_snake_case_type_tag() {
        let ev = ChatEvent::GuardTripped {
            guard: GuardKind::Repetition,
            action: GuardAction::ReturnedEarlierResult,
            skill: Some("get_time".into()),
            detail: "same call".into(),
            evidence: vec![Evidence::new("c1", "get_time", "{}", &"x".repeat(300))],
        };
        let json = serde_json::to_value(&ev).unwrap();
        assert_eq!(json["type"], "guard_tripped");
        assert_eq!(json["guard"], "repetition");
        assert_eq!(json["action"], "returned_earlier_result");
        assert_eq!(ev.kind(), "guard_tripped");
        assert_eq!(
            json["evidence"][0]["result"]
                .as_str()
                .map(|r| r.chars().count()),
            Some(201)
        );
        let back: ChatEvent = serde_json::from_value(json).unwrap();
        assert_eq!(back, ev);
    }
}
