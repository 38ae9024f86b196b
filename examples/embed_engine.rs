//! Embed buddy's engine in your own program, with the built-in scripted model (no
//! network, no key): a turn that calls the real `get_time` skill, every event printed as
//! it happens, and the outcome (stop reason, answer, stats) at the end.
//!
//! Run it: `cargo run -p buddy-examples --example embed_engine`

use std::sync::Arc;

use buddy_core::ChatEvent;
use buddy_engine::{Engine, LoopPolicy, TurnOutcome, TurnRequest};
use buddy_scripted::{Scenario, ScriptedProvider};
use buddy_skills::builtin::{FileLimits, builtin_skills};
use buddy_skills::{Sandbox, SkillRegistry};

/// The scripted model's rules: call `get_time` first, then answer with its result.
const SCRIPT: &str = r#"{
  "name": "clock",
  "prompt": "What time is it?",
  "expect": { "stop_reason": "completed", "model_calls": 2, "tool_calls": 1 },
  "rules": [
    { "when": { "round": 1 }, "reply": { "text": "Let me look.", "tool_calls": [{ "name": "get_time" }] } },
    { "when": { "round": 2 }, "reply": { "text": "It is {last_result}." } }
  ]
}"#;

/// Runs one turn and prints what happens; returns the outcome.
async fn run() -> anyhow::Result<TurnOutcome> {
    // The model: any `buddy_core::Provider`. Here the scripted one, from the rules above.
    let scenario = Scenario::parse(SCRIPT, "embed_engine example")?;
    let provider = Arc::new(ScriptedProvider::new(Arc::new(scenario)));

    // The tools: buddy's built-ins, confined to a sandbox directory.
    let sandbox = Sandbox::new(std::env::temp_dir())?;
    let mut skills = SkillRegistry::new();
    skills.register_all(builtin_skills(&sandbox, FileLimits::default()))?;

    let engine = Arc::new(Engine::new(provider, Arc::new(skills)));
    let request =
        TurnRequest::new("scripted", "What time is it?").with_policy(LoopPolicy::default());
    let (mut events, turn) = engine.spawn(request);
    while let Some(event) = events.recv().await {
        match event {
            ChatEvent::TextDelta { text } => print!("{text}"),
            ChatEvent::ToolCallStart {
                name, arguments, ..
            } => println!("\n→ {name} {arguments}"),
            ChatEvent::ToolCallResult { name, content, .. } => println!("← {name}: {content}"),
            other => println!("\n{}", serde_json::to_string(&other)?),
        }
    }
    let outcome = turn.await?;
    println!(
        "stop: {} after {} model calls",
        outcome.reason, outcome.stats.model_calls
    );
    Ok(outcome)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    run().await.map(drop)
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_example_runs_a_whole_turn() -> anyhow::Result<()> {
        let outcome = super::run().await?;
        assert_eq!(outcome.reason, buddy_core::StopReason::Completed);
        assert_eq!(outcome.stats.tool_calls, 1);
        // The answer quotes what the real skill returned.
        let result = outcome.new_messages().iter().find_map(|m| match m {
            buddy_core::Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        });
        let answer = outcome.answer.unwrap_or_default();
        assert!(
            result.is_some_and(|r| !r.is_empty() && answer.contains(&r)),
            "{answer}"
        );
        Ok(())
    }
}
