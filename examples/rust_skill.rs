//! Write a tool in Rust: implement `buddy_core::Skill` and register it. `execute`
//! returns a boxed future, so its body is `Box::pin(async move { … })`; arguments
//! arrive already checked against `parameters()` (a JSON Schema), and an `Err` becomes
//! an error result the model reads, never a crash.
//!
//! Run it: `cargo run -p buddy-examples --example rust_skill`

use std::sync::Arc;

use buddy_core::{BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError};
use buddy_engine::{Engine, TurnOutcome, TurnRequest};
use buddy_scripted::{Scenario, ScriptedProvider};
use buddy_skills::SkillRegistry;
use serde_json::{Value, json};

/// Counts the words of a text.
struct WordCount;

impl Skill for WordCount {
    fn name(&self) -> &str {
        "word_count"
    }

    fn description(&self) -> &str {
        "Counts the words in a text."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "text": { "type": "string" } },
            "required": ["text"],
        })
    }

    /// Same text, same count: a repeat is answered from the first result and counts
    /// towards loop detection.
    fn semantics(&self) -> RepeatSemantics {
        RepeatSemantics::Pure
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        _ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move {
            let text = args["text"]
                .as_str()
                .ok_or_else(|| SkillError::Failed("`text` must be a string".into()))?;
            if text.trim().is_empty() {
                return Err(SkillError::Failed(
                    "the text is empty; send some words".into(),
                ));
            }
            Ok(format!("{} words", text.split_whitespace().count()))
        })
    }
}

/// A scripted model that calls the skill once, then answers with its result.
const SCRIPT: &str = r#"{
  "name": "count",
  "prompt": "How many words?",
  "expect": { "stop_reason": "completed", "model_calls": 2, "tool_calls": 1 },
  "rules": [
    { "when": { "round": 1 }, "reply": { "tool_calls": [{ "name": "word_count", "arguments": { "text": "the quick brown fox" } }] } },
    { "when": { "round": 2 }, "reply": { "text": "That sentence has {last_result}." } }
  ]
}"#;

/// Runs one turn that uses the skill.
async fn run() -> anyhow::Result<TurnOutcome> {
    let mut skills = SkillRegistry::new();
    skills.register(Arc::new(WordCount))?;
    let provider = Arc::new(ScriptedProvider::new(Arc::new(Scenario::parse(
        SCRIPT,
        "rust_skill example",
    )?)));
    let engine = Engine::new(provider, Arc::new(skills));
    let (_events, outcome) = engine
        .run_collect(TurnRequest::new(
            "scripted",
            "How many words in 'the quick brown fox'?",
        ))
        .await;
    println!(
        "{}: {}",
        outcome.reason,
        outcome.answer.as_deref().unwrap_or("")
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
    async fn the_skill_result_reaches_the_answer() -> anyhow::Result<()> {
        let outcome = super::run().await?;
        assert_eq!(outcome.reason, buddy_core::StopReason::Completed);
        assert_eq!(
            outcome.answer.as_deref(),
            Some("That sentence has 4 words.")
        );
        Ok(())
    }
}
