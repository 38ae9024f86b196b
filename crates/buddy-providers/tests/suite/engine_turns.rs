//! A full engine turn per provider against a loopback server: two tool rounds, then an
//! answer; and a looping model sent to Finalize. The requests the server received are
//! checked for each API's native shapes.

use std::sync::Arc;

use buddy_core::{StopReason, ToolOutcome};
use buddy_engine::{Engine, LoopPolicy, TurnRequest};
use buddy_testkit::{
    MockResponse, MockServer, TestTool, TestToolbox, anthropic_sse, assert_history_valid,
    openai_sse,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{anthropic, openai, quick_http};

fn toolbox() -> TestToolbox {
    TestToolbox::new()
        .with(
            "get_weather",
            TestTool::new(|_, _| ToolOutcome::ok("14°C and rain")),
        )
        .with(
            "get_forecast",
            TestTool::new(|_, _| ToolOutcome::ok("sunny tomorrow")),
        )
}

async fn run(
    provider: impl buddy_core::Provider + 'static,
    policy: LoopPolicy,
) -> buddy_engine::TurnOutcome {
    let engine = Engine::new(Arc::new(provider), Arc::new(toolbox()));
    let request = TurnRequest::new("model-x", "Umbrella today or tomorrow in Paris?")
        .with_history(vec![buddy_core::Message::system("Be brief.")])
        .with_policy(policy);
    let (_, outcome) = engine.run_collect(request).await;
    assert_history_valid(&outcome.messages);
    outcome
}

#[tokio::test]
async fn openai_two_tool_rounds_then_an_answer() {
    let server = MockServer::sequence(vec![
        MockResponse::sse(openai_sse(
            "Checking.",
            &[("call_a", "get_weather", r#"{"city":"Paris"}"#)],
        )),
        MockResponse::sse(openai_sse(
            "",
            &[("call_b", "get_forecast", r#"{"city":"Paris"}"#)],
        )),
        MockResponse::sse(openai_sse("Umbrella today, not tomorrow.", &[])),
    ])
    .await;
    let outcome = run(openai(&server.url(), quick_http()), LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("Umbrella today, not tomorrow.")
    );
    assert_eq!(
        (outcome.stats.model_calls, outcome.stats.tool_calls),
        (3, 2)
    );
    assert_eq!(
        (outcome.stats.input_tokens, outcome.stats.output_tokens),
        (60, 30),
        "usage from the stream"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("POST", "/v1/chat/completions")
        );
        assert_eq!(r.header("authorization"), Some("Bearer sk-test"));
        assert_eq!(r.header("user-agent"), Some(buddy_providers::USER_AGENT));
        let body = r.json();
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["model"], "model-x");
        let names: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["get_weather", "get_forecast"]);
        assert_eq!(body["tools"][0]["type"], "function");
    }
    let third = requests[2].json();
    assert_eq!(
        third["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Umbrella today or tomorrow in Paris?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_a", "content": "14°C and rain"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_b", "type": "function", "function": {"name": "get_forecast", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_b", "content": "sunny tomorrow"},
        ])
    );
}

#[tokio::test]
async fn anthropic_two_tool_rounds_then_an_answer() {
    let server = MockServer::sequence(vec![
        MockResponse::sse(anthropic_sse(
            "Checking.",
            &[("toolu_a", "get_weather", r#"{"city":"Paris"}"#)],
        )),
        MockResponse::sse(anthropic_sse(
            "",
            &[
                ("toolu_b", "get_forecast", r#"{"city":"Paris"}"#),
                ("toolu_c", "get_weather", r#"{"city":"Lyon"}"#),
            ],
        )),
        MockResponse::sse(anthropic_sse("Umbrella today, not tomorrow.", &[])),
    ])
    .await;
    let outcome = run(
        anthropic(&server.url(), quick_http()),
        LoopPolicy::default(),
    )
    .await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("Umbrella today, not tomorrow.")
    );
    assert_eq!(
        (outcome.stats.model_calls, outcome.stats.tool_calls),
        (3, 3)
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.header("x-api-key"), Some("sk-ant-test"));
        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
        let body = r.json();
        assert_eq!(
            (body["stream"].clone(), body["max_tokens"].clone()),
            (json!(true), json!(4096))
        );
        assert_eq!(body["system"], "Be brief.");
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    }
    let third = requests[2].json();
    assert_eq!(
        third["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Umbrella today or tomorrow in Paris?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "14°C and rain"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_b", "name": "get_forecast", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_c", "name": "get_weather", "input": {"city": "Lyon"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "sunny tomorrow"},
                {"type": "tool_result", "tool_use_id": "toolu_c", "content": "14°C and rain"}]},
        ]),
        "consecutive tool results are merged into one user message"
    );
}

/// A model that calls the same tool every time it may.
fn looping(
    kind: &'static str,
) -> impl Fn(&buddy_testkit::HttpRequest, usize) -> MockResponse + Send + Sync {
    move |request, n| {
        let body = request.json();
        let callable = body["tools"].is_array() && body["tool_choice"] != json!({"type": "none"});
        let id = format!("call_{n}");
        let calls: Vec<(&str, &str, &str)> = if callable {
            vec![(id.as_str(), "get_weather", r#"{"city":"Paris"}"#)]
        } else {
            vec![]
        };
        let text = if callable {
            ""
        } else {
            "Rain today: take an umbrella."
        };
        match kind {
            "openai" => MockResponse::sse(openai_sse(text, &calls)),
            _ => MockResponse::sse(anthropic_sse(text, &calls)),
        }
    }
}

fn last_body(server: &MockServer) -> Value {
    server.requests().last().unwrap().json()
}

#[tokio::test]
async fn finalize_withdraws_tools_in_each_api_s_own_way() {
    let server = MockServer::start(looping("openai")).await;
    let outcome = run(openai(&server.url(), quick_http()), LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::LoopDetected);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("Rain today: take an umbrella.")
    );
    let body = last_body(&server);
    assert!(
        body.get("tools").is_none() && body.get("tool_choice").is_none(),
        "OpenAI Finalize sends no tools: {body}"
    );
    assert!(
        body["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("Do not call any tools")
    );

    let server = MockServer::start(looping("anthropic")).await;
    let outcome = run(
        anthropic(&server.url(), quick_http()),
        LoopPolicy::default(),
    )
    .await;
    assert_eq!(outcome.reason, StopReason::LoopDetected);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("Rain today: take an umbrella.")
    );
    let body = last_body(&server);
    assert_eq!(
        body["tool_choice"],
        json!({"type": "none"}),
        "Anthropic Finalize: tool_choice none"
    );
    assert!(
        body["tools"].is_array(),
        "tools stay defined: the API refuses tool blocks without them"
    );
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "user");
    let blocks = last["content"].as_array().unwrap();
    assert_eq!(blocks.first().unwrap()["type"], "tool_result");
    assert!(
        blocks.last().unwrap()["text"]
            .as_str()
            .unwrap()
            .contains("Do not call any tools")
    );
}

#[tokio::test]
async fn notes_travel_apart_from_tool_results_in_each_api_s_own_form() {
    // A small budget, so the "calls left" note is sent from the third call on.
    let policy = LoopPolicy {
        max_model_calls: 6,
        ..LoopPolicy::default()
    };
    let server = MockServer::start(looping("openai")).await;
    run(openai(&server.url(), quick_http()), policy.clone()).await;
    let requests = server.requests();
    let body = requests[3].json();
    let messages = body["messages"].as_array().unwrap();
    for m in messages.iter().filter(|m| m["role"] == "tool") {
        assert_eq!(m["content"], "14°C and rain", "tool output unchanged");
    }
    let last = messages.last().unwrap();
    assert_eq!(
        last["role"], "system",
        "the note is a system message of its own: never the user speaking"
    );
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .starts_with("[system note] 3 of 6 model calls left"),
        "{last}"
    );
    assert_eq!(messages[messages.len() - 2]["role"], "tool");

    // A server whose template refuses a late system message gets it as user text.
    let server = MockServer::start(looping("openai")).await;
    let provider = buddy_providers::OpenAiProvider::new(buddy_providers::OpenAiOptions {
        base_url: format!("{}/v1", server.url()),
        api_key: Some("sk-test".into()),
        http: quick_http(),
        compat: buddy_providers::OpenAiCompat {
            notes_as_user: true,
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    run(provider, policy.clone()).await;
    let body = server.requests()[3].json();
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "user", "{last}");

    let server = MockServer::start(looping("anthropic")).await;
    run(anthropic(&server.url(), quick_http()), policy).await;
    let requests = server.requests();
    let body = requests[3].json();
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert!(
        roles.windows(2).all(|w| w[0] != w[1]),
        "roles alternate: {roles:?}"
    );
    // The note is a text block after the tool results (the API has no mid-conversation
    // system message); the tool's output is untouched.
    let last = messages.last().unwrap();
    let blocks = last["content"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "tool_result");
    assert_eq!(
        blocks[0]["content"], "14°C and rain",
        "tool output unchanged"
    );
    assert_eq!(blocks[1]["type"], "text");
    assert!(
        blocks[1]["text"]
            .as_str()
            .unwrap()
            .starts_with("[system note] 3 of 6 model calls left"),
        "{last}"
    );
}
