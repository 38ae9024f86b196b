//! The loop-efficiency report: every scenario through the full HTTP path (engine ->
//! OpenAI provider -> mock-server on 127.0.0.1), under each scenario's own policy (the
//! default one for every loop scenario), with model calls also counted from outside
//! in the mock's request log.

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{ChatEvent, StopReason};
use buddy_engine::{Engine, TurnRequest};
use buddy_providers::{OpenAiCompat, OpenAiOptions, OpenAiProvider, Scenario};
use buddy_skills::Sandbox;
use serde::Serialize;

use crate::config::SkillsConfig;
use crate::mock_server::{MemoryLog, MockServer};
use crate::scenario_run::{RunError, scenario_policy};
use crate::toolbox::build_registry;

/// Repetition loops: design.md allows them at most this many wasted model calls.
pub const REPETITION_LOOPS: [&str; 3] = ["get_time_forever", "identical_forever", "ab_cycle"];
/// Legitimate work: must waste nothing and complete.
pub const LEGITIMATE: [&str; 6] = [
    "chain_3_steps",
    "chain_15_steps",
    "paging_12",
    "parallel_3",
    "polling",
    "plain_chat",
];
/// Most wasted model calls allowed for a repetition loop.
pub const MAX_WASTED_ON_REPETITION: u32 = 2;

/// One scenario's line of the report.
#[derive(Clone, Debug, Serialize)]
pub struct LoopReport {
    pub scenario: String,
    pub model_calls: u32,
    /// Requests the mock-server logged for this scenario.
    pub requests_seen_by_mock: usize,
    pub tool_calls: u32,
    pub ideal_model_calls: Option<u32>,
    pub wasted: Option<u32>,
    /// The scenario file's stated budget: its expected model calls.
    pub budget: u32,
    pub stop_reason: StopReason,
    /// An answer reached the user (a `done` with text). Every scenario under a policy
    /// that finalizes must answer; `on_limit = "error"` ones must not.
    pub answered: bool,
    /// Whether this line meets design.md's target for its kind of scenario.
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
            api_key: None,
            headers: Default::default(),
            http: Default::default(),
            stream: true,
            max_output_tokens: None,
            compat: OpenAiCompat::default(),
        })
        .map_err(|e| RunError::Setup(e.to_string()))?;
        let policy = scenario_policy(&scenario, &[])?;
        // A scenario whose policy says on_limit = "error" is meant to end without an answer.
        let answer_expected = policy.on_limit != buddy_engine::OnLimit::Error;
        let registry = build_registry(&SkillsConfig::default(), sandbox, Some(&scenario))?;
        let engine = Engine::new(Arc::new(provider), Arc::new(registry));
        let model = format!("scripted:{}", scenario.name);
        let history = scenario
            .system
            .iter()
            .map(buddy_core::Message::system)
            .collect();
        let request = TurnRequest::new(model.clone(), scenario.prompt.clone())
            .with_history(history)
            .with_policy(policy);
        let (events, outcome) = engine.run_collect(request).await;
        let seen = log
            .text()
            .lines()
            .filter(|line| line.contains(&format!("\"model\":\"{model}\"")))
            .count();
        let answered = matches!(events.last(), Some(ChatEvent::Done { answer, .. }) if !answer.trim().is_empty());
        let ideal = scenario.expect.ideal_model_calls;
        let wasted = ideal.map(|i| outcome.stats.model_calls.saturating_sub(i));
        let name = scenario.name.as_str();
        let meets_target = answered == answer_expected
            && if REPETITION_LOOPS.contains(&name) {
                wasted.is_some_and(|w| w <= MAX_WASTED_ON_REPETITION)
            } else if LEGITIMATE.contains(&name) {
                wasted == Some(0) && outcome.reason == StopReason::Completed
            } else {
                outcome.stats.model_calls <= scenario.expect.model_calls
            };
        reports.push(LoopReport {
            scenario: scenario.name.clone(),
            model_calls: outcome.stats.model_calls,
            requests_seen_by_mock: seen,
            tool_calls: outcome.stats.tool_calls,
            ideal_model_calls: ideal,
            wasted,
            budget: scenario.expect.model_calls,
            stop_reason: outcome.reason,
            answered,
            meets_target,
        });
    }
    server.abort();
    Ok(reports)
}
