//! buddy-engine integration tests, driven through the public API only.

mod approvals;
mod behaviours;
mod call_budget;
mod call_ledger;
mod cancellation;
mod context;
mod elicitation;
mod fatal_round;
mod limits;
mod prompt_cache;
mod property;
mod refusals;
mod replay;
mod resumed_agent_tasks;
mod resumed_tasks;
mod routing;
mod subagents;
mod tool_changes;
mod tool_progress;
mod trim_steps;
mod turn_events;

use std::sync::Arc;

use buddy_core::{ChatEvent, Provider, ToolCall, Toolbox};
use buddy_engine::{Engine, LoopPolicy, TurnOutcome, TurnRequest};
use buddy_testkit::{assert_event_order, assert_history_valid};

/// A call with JSON `args`.
pub fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::new(id, name, args.to_string())
}

/// Runs one turn and checks the invariants every turn must keep.
pub async fn run_turn(
    provider: impl Provider + 'static,
    toolbox: impl Toolbox + 'static,
    policy: LoopPolicy,
) -> (Vec<ChatEvent>, TurnOutcome) {
    let engine = Engine::new(Arc::new(provider), Arc::new(toolbox));
    // buddy's own waits (its checks of a pollable tool) pass at once.
    let request = TurnRequest::new("test-model", "please help")
        .with_policy(policy)
        .with_clock(buddy_testkit::no_wait());
    let (events, outcome) = engine.run_collect(request).await;
    assert_event_order(&events);
    assert_history_valid(&outcome.messages);
    (events, outcome)
}

/// The terminal event.
pub fn terminal(events: &[ChatEvent]) -> &ChatEvent {
    events.last().expect("a turn always emits a terminal event")
}

/// Distinct words, so results of counted calls never look alike.
pub const WORDS: [&str; 16] = [
    "anchor", "bridge", "candle", "dragon", "ember", "falcon", "glacier", "harbor", "island",
    "jungle", "kettle", "lantern", "meadow", "nectar", "orchid", "pepper",
];
