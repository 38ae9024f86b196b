use serde::{Deserialize, Serialize};

/// Why a turn ended. Every turn ends with exactly one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model gave its final answer.
    Completed,
    /// The model called the `finish` tool with its answer.
    FinishTool,
    /// The model called tools the client runs itself: the turn pauses and hands them back.
    ClientToolCalls,
    /// The model's answer was cut by its output-token limit.
    Truncated,
    /// The model-call cap was reached; the reserved last call produced the answer.
    MaxModelCalls,
    /// The tool-call cap was reached.
    MaxToolCalls,
    /// A loop guard (repetition, cycle, near-duplicate, repeated answer) ended the turn.
    LoopDetected,
    /// Every tool was withdrawn (circuit breakers, per-skill limits) and the model was asked to answer.
    ToolsExhausted,
    /// The turn's token budget was spent.
    TokenBudget,
    /// The turn's money budget (`max_turn_cost_usd`) would be passed by another call.
    CostBudget,
    /// The turn's deadline passed.
    Deadline,
    /// The caller cancelled the turn (Ctrl-C, client disconnect).
    Cancelled,
    /// Even the pinned messages do not fit the context window.
    ContextOverflow,
    /// The provider failed and retrying could not help.
    ProviderError,
    /// A skill reported a fatal error.
    SkillFailed,
    /// The request was invalid before anything was sent (a bug, refused loudly).
    InvalidRequest,
    /// The model's reply kept repeating the same text; it was cut and the text so far kept.
    RepetitiveOutput,
    /// The model gave no answer text; buddy's answer quotes the tool results instead.
    NoAnswer,
    /// The turn's messages could not be stored; it was stopped rather than run unrecorded.
    StoreError,
    /// The model called tools that need a person's approval: the turn pauses (stored)
    /// until the caller resumes it with a decision for each pending call.
    ApprovalRequired,
    /// The model server refused the conversation for repeating tool calls (its own loop
    /// guard); buddy asked for the final answer without the repeated rounds.
    ProviderRefusedLoop,
}

// A variant added to the enum but not to `ALL` fails the build here.
const _: () = assert!(StopReason::ALL.len() == StopReason::ProviderRefusedLoop as usize + 1);

impl StopReason {
    /// Every stop reason, in declaration order.
    pub const ALL: [StopReason; 21] = [
        StopReason::Completed,
        StopReason::FinishTool,
        StopReason::ClientToolCalls,
        StopReason::Truncated,
        StopReason::MaxModelCalls,
        StopReason::MaxToolCalls,
        StopReason::LoopDetected,
        StopReason::ToolsExhausted,
        StopReason::TokenBudget,
        StopReason::CostBudget,
        StopReason::Deadline,
        StopReason::Cancelled,
        StopReason::ContextOverflow,
        StopReason::ProviderError,
        StopReason::SkillFailed,
        StopReason::InvalidRequest,
        StopReason::RepetitiveOutput,
        StopReason::NoAnswer,
        StopReason::StoreError,
        StopReason::ApprovalRequired,
        StopReason::ProviderRefusedLoop,
    ];

    /// The stop reason named `name` (its [`as_str`](Self::as_str) form), if any; no JSON
    /// round trip.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// The snake_case name used in events, logs and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::FinishTool => "finish_tool",
            StopReason::ClientToolCalls => "client_tool_calls",
            StopReason::Truncated => "truncated",
            StopReason::MaxModelCalls => "max_model_calls",
            StopReason::MaxToolCalls => "max_tool_calls",
            StopReason::LoopDetected => "loop_detected",
            StopReason::ToolsExhausted => "tools_exhausted",
            StopReason::TokenBudget => "token_budget",
            StopReason::CostBudget => "cost_budget",
            StopReason::Deadline => "deadline",
            StopReason::Cancelled => "cancelled",
            StopReason::ContextOverflow => "context_overflow",
            StopReason::ProviderError => "provider_error",
            StopReason::SkillFailed => "skill_failed",
            StopReason::InvalidRequest => "invalid_request",
            StopReason::RepetitiveOutput => "repetitive_output",
            StopReason::NoAnswer => "no_answer",
            StopReason::StoreError => "store_error",
            StopReason::ApprovalRequired => "approval_required",
            StopReason::ProviderRefusedLoop => "provider_refused_loop",
        }
    }

    /// True for a turn stopped at a limit, which a person can continue with a fresh budget.
    pub fn is_capped(self) -> bool {
        matches!(
            self,
            StopReason::MaxModelCalls
                | StopReason::MaxToolCalls
                | StopReason::TokenBudget
                | StopReason::CostBudget
                | StopReason::Deadline
        )
    }

    /// True when the model delivered its own answer without any guard stepping in.
    pub fn is_clean(self) -> bool {
        matches!(
            self,
            StopReason::Completed
                | StopReason::FinishTool
                | StopReason::ClientToolCalls
                | StopReason::ApprovalRequired
        )
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a turn cost: model calls, tool calls, tokens, wall time and, when the model's
/// price is known, money.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnStats {
    pub model_calls: u32,
    pub tool_calls: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The part of `input_tokens` read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// The part of `input_tokens` written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    pub elapsed_ms: u64,
    /// What the model calls cost, in dollars (absent when the model's price is unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<crate::Usd>,
    /// The part of these figures the turn's sub-agents made (already in the totals above,
    /// which cover the whole tree of agents).
    #[serde(default, skip_serializing_if = "DelegatedStats::is_empty")]
    pub delegated: DelegatedStats,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What a turn's sub-agents (and theirs) used, counted in the turn's own totals too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegatedStats {
    /// Sub-agents started under the turn, at every depth.
    pub agents: u32,
    pub model_calls: u32,
    pub tool_calls: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The part of `input_tokens` read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// The part of `input_tokens` written to the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<crate::Usd>,
}

impl DelegatedStats {
    /// True when no sub-agent ran (the field is then left out of JSON).
    pub fn is_empty(&self) -> bool {
        *self == DelegatedStats::default()
    }
}

#[cfg(test)]
mod names {
    use super::StopReason;

    #[test]
    fn every_stop_reason_has_one_name_it_is_found_by_and_serialised_as() {
        let mut names: Vec<&str> = StopReason::ALL.iter().map(|r| r.as_str()).collect();
        for reason in StopReason::ALL {
            assert_eq!(StopReason::from_name(reason.as_str()), Some(reason));
            assert_eq!(
                serde_json::to_value(reason).ok(),
                Some(serde_json::Value::from(reason.as_str()))
            );
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), StopReason::ALL.len());
        assert_eq!(StopReason::from_name("interrupted"), None);
    }
}
