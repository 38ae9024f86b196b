//! The process exit code for each way a turn can end.

use buddy_core::StopReason;

/// 0 for an answer the model gave; distinct codes for limits, loops and errors.
///
/// | code | meaning |
/// |---|---|
/// | 0 | completed, finish_tool, client_tool_calls |
/// | 1 | provider_error, skill_failed, invalid_request, store_error |
/// | 2 | bad command line or config (from clap / buddy itself) |
/// | 3 | a limit: max_model_calls, max_tool_calls, tools_exhausted, token_budget, cost_budget, deadline |
/// | 4 | loop_detected, provider_refused_loop (the model server refused the loop itself) |
/// | 5 | context_overflow |
/// | 6 | truncated |
/// | 7 | no_answer (buddy's answer quotes the tool results) |
/// | 8 | repetitive_output |
/// | 9 | approval_required (calls wait for a person's decision; nothing of them ran) |
/// | 130 | cancelled |
/// | 141 | stdout's reader went away (set in `main`, not a stop reason) |
pub fn exit_code(reason: StopReason) -> u8 {
    match reason {
        StopReason::Completed | StopReason::FinishTool | StopReason::ClientToolCalls => 0,
        StopReason::ProviderError
        | StopReason::SkillFailed
        | StopReason::InvalidRequest
        | StopReason::StoreError => 1,
        StopReason::MaxModelCalls
        | StopReason::MaxToolCalls
        | StopReason::ToolsExhausted
        | StopReason::TokenBudget
        | StopReason::CostBudget
        | StopReason::Deadline => 3,
        StopReason::LoopDetected | StopReason::ProviderRefusedLoop => 4,
        StopReason::ContextOverflow => 5,
        StopReason::Truncated => 6,
        StopReason::NoAnswer => 7,
        StopReason::RepetitiveOutput => 8,
        StopReason::ApprovalRequired => 9,
        StopReason::Cancelled => 130,
    }
}
