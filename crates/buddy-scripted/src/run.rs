//! Runs a scenario through the real engine, registry and scripted model, and checks
//! the outcome it states.

use std::path::PathBuf;
use std::sync::Arc;

use buddy_core::{ChatEvent, Message, Provider, StopReason, Toolbox, TurnStats};
use buddy_engine::{Engine, LoopPolicy, PolicyError, PolicyPatch, TurnRequest, attach_agents};
use buddy_skills::{RegistryError, Sandbox, SkillRegistry};
use serde::Serialize;

use crate::provider::ScriptedProvider;
use crate::scenario::{Scenario, ScenarioError};
use crate::tools::{UnknownBuiltin, scenario_skills};

/// A scenario could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("scenario `{scenario}`: {source}")]
    Policy {
        scenario: String,
        #[source]
        source: PolicyError,
    },
    #[error(transparent)]
    Tools(#[from] UnknownBuiltin),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("{0}")]
    Setup(String),
}

/// What one scenario run did, next to what it expected.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioReport {
    pub name: String,
    pub reason: StopReason,
    pub stats: TurnStats,
    pub answer: String,
    pub expected_reason: StopReason,
    pub expected_model_calls: u32,
    pub expected_tool_calls: u32,
    pub ideal_model_calls: Option<u32>,
    /// Each way the run differed from the expectation; empty when it met it.
    pub mismatches: Vec<String>,
    #[serde(skip)]
    pub events: Vec<ChatEvent>,
    #[serde(skip)]
    pub messages: Vec<Message>,
    /// The turn's recording, for replay.
    #[serde(skip)]
    pub recording: Option<buddy_engine::Recording>,
}

impl ScenarioReport {
    /// True when the run met every expectation.
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty()
    }
}

/// The policy a scenario runs under: defaults, then its own `policy`, then `extra`.
pub fn scenario_policy(
    scenario: &Scenario,
    extra: &[&PolicyPatch],
) -> Result<LoopPolicy, RunError> {
    let wrap = |source| RunError::Policy {
        scenario: scenario.name.clone(),
        source,
    };
    let mut policy = LoopPolicy::default();
    policy.apply(&scenario.policy).map_err(wrap)?;
    for patch in extra {
        policy.apply(patch).map_err(wrap)?;
    }
    Ok(policy)
}

/// A registry holding fresh instances of the scenario's tools (default timeouts).
pub fn scenario_registry(
    scenario: &Scenario,
    sandbox: &Sandbox,
) -> Result<SkillRegistry, RunError> {
    let mut registry = SkillRegistry::new();
    registry.register_all(scenario_skills(scenario, sandbox)?)?;
    Ok(registry)
}

/// Runs `scenario` once with fresh tools and checks its expectation.
pub async fn run_scenario(
    scenario: Scenario,
    sandbox: &Sandbox,
    extra: &[&PolicyPatch],
) -> Result<ScenarioReport, RunError> {
    let policy = scenario_policy(&scenario, extra)?;
    let registry = scenario_registry(&scenario, sandbox)?;
    let scenario = Arc::new(scenario);
    let provider: Arc<dyn Provider> = Arc::new(ScriptedProvider::new(Arc::clone(&scenario)));
    let toolbox = with_agents(&scenario, Arc::new(registry), &provider)?;
    let engine = Engine::new(provider, toolbox);
    let request = scenario_request(&scenario, format!("scripted:{}", scenario.name), policy);
    let (events, outcome) = run_until_cancelled(&engine, request, scenario.cancel_after_ms).await;
    let recording = outcome.recording();
    let expect = &scenario.expect;
    let answer = outcome.answer.clone().unwrap_or_default();
    let mut mismatches = Vec::new();
    if outcome.reason != expect.stop_reason {
        mismatches.push(format!(
            "stop reason {} (expected {})",
            outcome.reason, expect.stop_reason
        ));
    }
    if outcome.stats.model_calls != expect.model_calls {
        mismatches.push(format!(
            "{} model calls (expected {})",
            outcome.stats.model_calls, expect.model_calls
        ));
    }
    if outcome.stats.tool_calls != expect.tool_calls {
        mismatches.push(format!(
            "{} tool calls (expected {})",
            outcome.stats.tool_calls, expect.tool_calls
        ));
    }
    if let Some(needle) = &expect.answer_contains
        && !answer.contains(needle.as_str())
    {
        mismatches.push(format!("answer lacks `{needle}`"));
    }
    Ok(ScenarioReport {
        name: scenario.name.clone(),
        reason: outcome.reason,
        stats: outcome.stats,
        answer,
        expected_reason: expect.stop_reason,
        expected_model_calls: expect.model_calls,
        expected_tool_calls: expect.tool_calls,
        ideal_model_calls: expect.ideal_model_calls,
        mismatches,
        events,
        messages: outcome.messages,
        recording: Some(recording),
    })
}

/// The scenario's turn for `model` under `policy`: its system prompt and prompt, on its
/// clock.
pub fn scenario_request(scenario: &Scenario, model: String, policy: LoopPolicy) -> TurnRequest {
    let history = scenario.system.iter().map(Message::system).collect();
    TurnRequest::new(model, scenario.prompt.clone())
        .with_history(history)
        .with_policy(policy)
        .with_clock(scenario.wait_clock())
}

/// Runs `request` to its end and collects its events; with `cancel_after_ms`, the turn
/// is cancelled that long after it starts (a scenario's scripted Ctrl-C).
pub async fn run_until_cancelled(
    engine: &Engine,
    request: TurnRequest,
    cancel_after_ms: Option<u64>,
) -> (Vec<ChatEvent>, buddy_engine::TurnOutcome) {
    let Some(ms) = cancel_after_ms else {
        return engine.run_collect(request).await;
    };
    let cancel = request.cancel.clone();
    let (done, ()) = tokio::join!(engine.run_collect(request), async {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        cancel.cancel();
    });
    done
}

/// `toolbox` with the scenario's sub-agents (if it declares any) offered beside its
/// tools; the agents' model calls go to `provider`, the scenario's model.
pub fn with_agents(
    scenario: &Scenario,
    toolbox: Arc<dyn Toolbox>,
    provider: &Arc<dyn Provider>,
) -> Result<Arc<dyn Toolbox>, RunError> {
    attach_agents(
        scenario.agents.clone(),
        toolbox,
        Arc::clone(provider),
        std::collections::HashMap::new(),
    )
    .map_err(|e| RunError::Setup(format!("scenario `{}`: {e}", scenario.name)))
}

/// `explicit`, else `./scenarios` when it exists, else the checkout buddy was built from
/// (for the benchmarks that hand a directory to another process).
pub fn scenarios_dir(explicit: Option<PathBuf>) -> PathBuf {
    explicit.unwrap_or_else(|| {
        let local = PathBuf::from("scenarios");
        if local.is_dir() {
            local
        } else {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios"))
        }
    })
}
