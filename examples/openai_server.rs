//! Call a real OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama, OpenRouter…):
//! `OpenAiOptions` has a `Default` (OpenAI's API, streaming), so set what differs and
//! keep the rest. The turn offers buddy's `get_time` skill.
//!
//! Run it:
//! `OPENAI_BASE_URL=http://127.0.0.1:8080/v1 BUDDY_MODEL=qwen2.5 cargo run -p buddy-examples --example openai_server`
//! (`OPENAI_API_KEY` is sent when set; without `OPENAI_BASE_URL` it calls api.openai.com).

use std::sync::Arc;

use buddy_core::StopReason;
use buddy_engine::{Engine, LoopPolicy, TurnOutcome, TurnRequest};
use buddy_providers::{OpenAiCompat, OpenAiOptions, OpenAiProvider};
use buddy_skills::builtin::{FileLimits, builtin_skill};
use buddy_skills::{Sandbox, SkillRegistry};

/// Runs one turn against the server at `base_url` (e.g. `http://127.0.0.1:8080/v1`).
async fn run(base_url: &str, api_key: Option<String>, model: &str) -> anyhow::Result<TurnOutcome> {
    let provider = OpenAiProvider::new(OpenAiOptions {
        base_url: base_url.to_owned(),
        api_key,
        // Switches for servers that need them; `buddy doctor` says which yours needs.
        compat: OpenAiCompat {
            tool_choice_auto: false,
            ..Default::default()
        },
        ..Default::default()
    })?;
    let sandbox = Sandbox::new(std::env::temp_dir())?;
    let mut skills = SkillRegistry::new();
    if let Some(get_time) = builtin_skill("get_time", &sandbox, FileLimits::default()) {
        skills.register(get_time)?;
    }
    let engine = Engine::new(Arc::new(provider), Arc::new(skills));
    let policy = LoopPolicy {
        max_model_calls: 6,
        ..LoopPolicy::default()
    };
    let (_events, outcome) = engine
        .run_collect(TurnRequest::new(model, "What time is it? Use the tool.").with_policy(policy))
        .await;
    match &outcome.answer {
        Some(answer) => println!(
            "{} ({}): {answer}",
            outcome.reason, outcome.stats.model_calls
        ),
        None => println!(
            "{}: {}",
            outcome.reason,
            outcome.error.as_deref().unwrap_or("")
        ),
    }
    Ok(outcome)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let base_url =
        std::env::var("OPENAI_BASE_URL").unwrap_or_else(|_| OpenAiOptions::default().base_url);
    let model = std::env::var("BUDDY_MODEL").unwrap_or_else(|_| "gpt-4o-mini".to_owned());
    let outcome = run(&base_url, std::env::var("OPENAI_API_KEY").ok(), &model).await?;
    if outcome.reason != StopReason::Completed {
        anyhow::bail!("the turn ended {}", outcome.reason);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use buddy_testkit::{MockResponse, MockServer, openai_sse};

    /// The example against a loopback server that streams a `get_time` call, then text.
    #[tokio::test]
    async fn the_example_talks_to_an_openai_compatible_server() -> anyhow::Result<()> {
        let server = MockServer::sequence(vec![
            MockResponse::sse(openai_sse("", &[("call_1", "get_time", "{}")])),
            MockResponse::sse(openai_sse("It is noon.", &[])),
        ])
        .await;
        let base = format!("{}/v1", server.url());
        let outcome = super::run(&base, Some("sk-test".into()), "local-model").await?;
        assert_eq!(outcome.reason, super::StopReason::Completed);
        assert_eq!(outcome.answer.as_deref(), Some("It is noon."));
        assert_eq!(outcome.stats.tool_calls, 1);
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].path, "/v1/chat/completions");
        assert_eq!(requests[0].header("authorization"), Some("Bearer sk-test"));
        assert!(
            requests[0]
                .header("user-agent")
                .is_some_and(|ua| ua.starts_with("buddy/"))
        );
        assert_eq!(requests[0].json()["model"], "local-model");
        assert_eq!(
            requests[0].json()["tools"][0]["function"]["name"],
            "get_time"
        );
        Ok(())
    }
}
