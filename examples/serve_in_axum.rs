//! Serve buddy's HTTP API (the SSE chat API, the OpenAI-compatible endpoints, stored
//! conversations) inside your own axum application, under `/buddy`, next to your own
//! routes. buddy asks a `Backend` for the model and tools of each turn; here it is the
//! scripted model and the `get_time` skill.
//!
//! Run it: `cargo run -p buddy-examples --example serve_in_axum`, then
//! `curl -N localhost:3000/buddy/v1/chat -H 'content-type: application/json' -d '{"message":"What time is it?"}'`

use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use buddy_engine::PolicyConfig;
use buddy_scripted::{Scenario, ScriptedProvider};
use buddy_server::{AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_skills::builtin::{FileLimits, builtin_skill};
use buddy_skills::{Sandbox, SkillRegistry};
use buddy_store::SqliteStore;

/// The scripted model's rules: call `get_time`, then answer with its result.
const SCRIPT: &str = r#"{
  "name": "clock",
  "prompt": "What time is it?",
  "expect": { "stop_reason": "completed", "model_calls": 2, "tool_calls": 1 },
  "rules": [
    { "when": { "tool_results_below": 1 }, "reply": { "tool_calls": [{ "name": "get_time" }] } },
    { "when": {}, "reply": { "text": "It is {last_result}." } }
  ]
}"#;

/// One model, `clock`, with one tool.
struct ClockBackend {
    scenario: Arc<Scenario>,
    skills: Arc<SkillRegistry>,
}

impl Backend for ClockBackend {
    fn models(&self) -> Vec<String> {
        vec!["clock".to_owned()]
    }

    fn resolve(
        &self,
        _provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<Resolved, BackendError> {
        if model.is_some_and(|m| m != "clock") {
            return Err(BackendError(
                "this server has one model: `clock`".to_owned(),
            ));
        }
        Ok(Resolved::new(
            Arc::new(ScriptedProvider::new(Arc::clone(&self.scenario))),
            self.skills.clone(),
            "clock",
        ))
    }
}

/// Your application: your routes, and buddy's under `/buddy`.
fn application() -> anyhow::Result<Router> {
    let sandbox = Sandbox::new(std::env::temp_dir())?;
    let mut skills = SkillRegistry::new();
    if let Some(get_time) = builtin_skill("get_time", &sandbox, FileLimits::default()) {
        skills.register(get_time)?;
    }
    let backend = ClockBackend {
        scenario: Arc::new(Scenario::parse(SCRIPT, "serve_in_axum example")?),
        skills: Arc::new(skills),
    };
    // A real deployment keeps its conversations in a file: SqliteStore::open(path).
    let store = Arc::new(SqliteStore::in_memory()?);
    // No keys: fine on loopback. Set `api_keys` before listening anywhere else.
    let state = AppState::new(
        store,
        Arc::new(backend),
        PolicyConfig::default(),
        ServerSettings::default(),
    );
    Ok(Router::new()
        .route(
            "/",
            get(|| async { "my application; buddy is under /buddy" }),
        )
        .nest("/buddy", buddy_server::app(state)))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, application()?).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The application on a loopback port: its own route, and a whole buddy turn
    /// streamed from the nested chat API.
    #[tokio::test]
    async fn buddy_answers_inside_the_application() -> anyhow::Result<()> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(axum::serve(listener, super::application()?).into_future());
        buddy_providers::install_crypto_provider();
        let client = reqwest::Client::new();

        let home = client.get(format!("{base}/")).send().await?.text().await?;
        assert!(home.starts_with("my application"));

        let models = client.get(format!("{base}/buddy/v1/models")).send().await?;
        assert_eq!(models.status(), 200);
        let models: serde_json::Value = models.json().await?;
        assert_eq!(models["data"][0]["id"], "clock");

        let reply = client
            .post(format!("{base}/buddy/v1/chat"))
            .json(&serde_json::json!({ "message": "What time is it?" }))
            .send()
            .await?;
        assert_eq!(reply.status(), 200);
        let stream = reply.text().await?;
        assert!(stream.contains("\"type\":\"tool_call_result\""), "{stream}");
        assert!(stream.contains("\"reason\":\"completed\""), "{stream}");

        let missing = client
            .get(format!("{base}/buddy/v1/nothing"))
            .send()
            .await?;
        assert_eq!(missing.status(), 404);
        server.abort();
        Ok(())
    }
}
