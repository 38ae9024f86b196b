//! The loop-efficiency report: every scenario through the full HTTP path (engine ->
//! OpenAI provider -> mock-server on 127.0.0.1), under each scenario's own policy (the
//! default one for every loop scenario), with model calls also counted from outside
//! in the mock's request log.

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{ChatEvent, StopReason};
use buddy_engine::Engine;
use buddy_providers::{OpenAiOptions, OpenAiProvider};
use buddy_skills::Sandbox;
use serde::Serialize;

use crate::mock_server::{MemoryLog, MockServer};
use crate::run::{
    RunError, run_until_cancelled, scenario_policy, scenario_registry, scenario_request,
    with_agents,
};
use crate::scenario::Scenario;

/// Loops and misbehaving models: (scenario, most model calls allowed, Finalize
/// included). The bounds follow termination v5 (a new action is progress; only
/// repetition is a loop; warn, then end): the same call 4 when its skill declares `pure`
/// or `effectful`; 9 for a tool that declares nothing, judged by its results (the fifth
/// unchanged result is warned, the eighth ends the turn: a job may say "running" seven
/// times), 10 when another call came first, and the same for results that differ only in
/// their numbers (`growing_file_edit`); A,B cycles of `pure` skills 6; cycles of
/// undeclared skills are warned at their fourth period and ended at their fifth, so a
/// period-3 cycle takes 16; a query rewritten word by word is still a new action each
/// time, so the note comes at the fifth such call (8); failing skills 6; an empty reply is
/// asked again twice (4), a reply that tells buddy's notes back once (4). Arguments that
/// count up (`junk_args_many_skills`) are new actions: only the caps bound them.
pub const LOOP_BOUNDS: [(&str, u32); 22] = [
    ("get_time_forever", 4),
    ("restart_service_forever", 9),
    ("identical_forever", 4),
    ("identical_seven_tools", 9),
    ("growing_file_edit", 9),
    ("ab_cycle", 6),
    ("cycle_period_3", 16),
    ("growing_args", 8),
    ("echo_search_growing", 8),
    ("circuit_breaker", 6),
    ("failing_varied_args", 6),
    ("answer_plus_call", 7),
    ("answer_plus_call_threshold", 2),
    ("finalize_echo", 9),
    ("finalize_call_as_text", 9),
    ("finalize_omits_result", 9),
    ("chanting_reply", 1),
    ("empty_answer", 4),
    ("noisy_poll", 10),
    ("empty_reply_reasked", 3),
    ("answer_echoes_note", 4),
    ("provider_refuses_loop", 3),
];
/// Legitimate work: must complete with no guard event and no wasted call.
pub const LEGITIMATE: [&str; 23] = [
    "grep_no_match_distinct",
    "scaffold_empty_outputs",
    "booking_tools_answer_none",
    "write_twelve_files",
    "echo_lookup_chain_24",
    "three_exports_polled",
    "six_searches_nothing_found",
    "fan_out_48_reads",
    "chain_3_steps",
    "chain_15_steps",
    "chain_result_tokens",
    "fix_failing_test",
    "budget_note_chain",
    "paging_12",
    "paging_numbers_only",
    "counter_results",
    "parallel_3",
    "parallel_batch",
    "polling",
    "polling_undeclared",
    "plain_chat",
    "poll_job_120s",
    "subagents_research",
];

/// Work that looks like a loop for a while and is warned, then goes on and completes
/// (termination v5: warn, then end): must complete, with warnings its only guard events.
pub const WARNED_THEN_COMPLETED: [&str; 3] = [
    "changes_course_after_note",
    "job_running_seven_times",
    "cmake_cycle_then_new_approach",
];

/// The most model calls a loop scenario may take, if it is one.
pub fn loop_bound(scenario: &str) -> Option<u32> {
    LOOP_BOUNDS
        .iter()
        .find(|(name, _)| *name == scenario)
        .map(|(_, bound)| *bound)
}

/// One scenario's line of the report.
#[derive(Clone, Debug, Serialize)]
pub struct LoopReport {
    pub scenario: String,
    pub model_calls: u32,
    /// Requests the mock-server answered for this scenario.
    pub requests_seen_by_mock: usize,
    pub tool_calls: u32,
    pub ideal_model_calls: Option<u32>,
    pub wasted: Option<u32>,
    /// The most model calls the scenario may take: its loop bound, else its expected calls.
    pub budget: u32,
    /// Guard events in the turn (legitimate work must have none).
    pub guard_events: usize,
    pub stop_reason: StopReason,
    /// An answer reached the user (a `done` with text). Every scenario under a policy
    /// that finalizes must answer; `on_limit = "error"` ones must not.
    pub answered: bool,
    /// Whether this line meets the target for its kind of scenario (docs/guide/scenarios.md).
    pub meets_target: bool,
}

/// Runs every scenario (except those that need a client's own tools) over HTTP.
pub async fn run_loops(
    scenarios: Vec<Scenario>,
    sandbox: &Sandbox,
) -> Result<Vec<LoopReport>, RunError> {
    let log = MemoryLog::default();
    let mock = MockServer::new(
        scenarios.clone(),
        Duration::ZERO,
        Some(Box::new(log.clone())),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| RunError::Setup(format!("cannot listen on 127.0.0.1: {e}")))?;
    let base = format!(
        "http://{}/v1",
        listener
            .local_addr()
            .map_err(|e| RunError::Setup(e.to_string()))?
    );
    let server = tokio::spawn(async move { axum::serve(listener, mock.router()).await });
    let mut reports = Vec::new();
    for scenario in scenarios {
        let provider = OpenAiProvider::new(OpenAiOptions {
            name: "mock".into(),
            base_url: base.clone(),
            ..OpenAiOptions::default()
        })
        .map_err(|e| RunError::Setup(e.to_string()))?;
        let policy = scenario_policy(&scenario, &[])?;
        // A scenario whose policy says on_limit = "error", or that scripts the client's
        // cancel, is meant to end without an answer.
        let answer_expected = policy.on_limit != buddy_engine::OnLimit::Error
            && scenario.expect.stop_reason != StopReason::Cancelled;
        let registry = scenario_registry(&scenario, sandbox)?;
        let provider: Arc<dyn buddy_core::Provider> = Arc::new(provider);
        let toolbox = with_agents(&scenario, Arc::new(registry), &provider)?;
        let engine = Engine::new(provider, toolbox);
        let model = format!("scripted:{}", scenario.name);
        let request = scenario_request(&scenario, model.clone(), policy);
        let (events, outcome) =
            run_until_cancelled(&engine, request, scenario.cancel_after_ms).await;
        // Requests the mock answered; one it refused (a scenario's HTTP error) made no reply,
        // as buddy counts it.
        let seen = log
            .text()
            .lines()
            .filter(|line| line.contains(&format!("\"model\":\"{model}\"")))
            .filter(|line| !line.contains("\"refused\""))
            .count();
        let answered = matches!(events.last(), Some(ChatEvent::Done { answer, .. }) if !answer.trim().is_empty());
        let ideal = scenario.expect.ideal_model_calls;
        let wasted = ideal.map(|i| outcome.stats.model_calls.saturating_sub(i));
        let name = scenario.name.as_str();
        let guard_events = events
            .iter()
            .filter(|e| matches!(e, ChatEvent::GuardTripped { .. }))
            .count();
        let budget = loop_bound(name).unwrap_or(scenario.expect.model_calls);
        let meets_target = answered == answer_expected
            && outcome.stats.model_calls <= budget
            && (!LEGITIMATE.contains(&name)
                || (wasted == Some(0)
                    && guard_events == 0
                    && outcome.reason == StopReason::Completed));
        reports.push(LoopReport {
            scenario: scenario.name.clone(),
            model_calls: outcome.stats.model_calls,
            requests_seen_by_mock: seen,
            tool_calls: outcome.stats.tool_calls,
            ideal_model_calls: ideal,
            wasted,
            budget,
            guard_events,
            stop_reason: outcome.reason,
            answered,
            meets_target,
        });
    }
    server.abort();
    Ok(reports)
}
