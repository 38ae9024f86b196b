//! Claude Code's requests through buddy to real upstream clients over HTTP (a local mock
//! model server): translated to an OpenAI-compatible server's Chat Completions and back,
//! and to an Anthropic server's Messages API.

use std::sync::Arc;

use axum::http::StatusCode;
use buddy_core::Provider;
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_providers::{AnthropicOptions, AnthropicProvider, OpenAiOptions, OpenAiProvider};
use buddy_server::{AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::SqliteStore;
use buddy_testkit::{
    HttpRequest, MockResponse, MockServer, TestToolbox, anthropic_sse, openai_sse,
};
use serde_json::{Value, json};

use super::messages::send;

/// One model, `upstream`, served by `provider`.
struct Upstream(Arc<dyn Provider>);

impl Backend for Upstream {
    fn models(&self) -> Vec<String> {
        vec!["upstream".into()]
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        Ok(Resolved {
            provider: Arc::clone(&self.0),
            toolbox: Arc::new(TestToolbox::new()),
            model: "upstream".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

fn state(provider: Arc<dyn Provider>) -> AppState {
    AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Upstream(provider)),
        PolicyConfig::default(),
        ServerSettings::default(),
    )
}

/// A request shaped as Claude Code sends one: system blocks with a cache mark, its tools,
/// and the history so far.
fn claude_code(history: &[Value]) -> axum::http::Request<axum::body::Body> {
    let body = json!({
        "model": "upstream", "max_tokens": 32000, "stream": false,
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "Bash", "description": "Run a command",
                   "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}},
                  {"name": "Read", "description": "Read a file",
                   "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}],
        "metadata": {"user_id": "user_1"},
        "messages": history,
    });
    axum::http::Request::post("/v1/messages")
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "claude-code-20250219")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap()
}

/// Plays two round trips: the model runs Bash, then answers from its output.
async fn two_round_trips(state: &AppState) -> Value {
    let mut history =
        vec![json!({"role": "user", "content": [{"type": "text", "text": "What is here?"}]})];
    let sent = send(state, claude_code(&history)).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    let reply: Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(reply["stop_reason"], "tool_use", "{reply}");
    let call = reply["content"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (&call["name"], &call["input"]),
        (&json!("Bash"), &json!({"command": "ls"}))
    );
    history.push(json!({"role": "assistant", "content": reply["content"]}));
    history.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call["id"], "content": "a.txt b.txt"}]}));
    let sent = send(state, claude_code(&history)).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    serde_json::from_str(&sent.body).unwrap()
}

#[tokio::test]
async fn claude_codes_request_is_answered_through_an_openai_compatible_upstream() {
    let upstream = MockServer::sequence(vec![
        MockResponse::sse(openai_sse("", &[("call_1", "Bash", r#"{"command":"ls"}"#)])),
        MockResponse::sse(openai_sse("Two files: a.txt and b.txt.", &[])),
    ])
    .await;
    let provider = OpenAiProvider::new(OpenAiOptions {
        base_url: format!("{}/v1", upstream.url()),
        api_key: Some("sk-upstream".into()),
        ..OpenAiOptions::default()
    })
    .unwrap();
    let reply = two_round_trips(&state(Arc::new(provider))).await;
    assert_eq!(reply["stop_reason"], "end_turn");
    assert_eq!(reply["content"][0]["text"], "Two files: a.txt and b.txt.");
    // What the OpenAI-compatible server got: Chat Completions, Claude Code's tools as
    // functions, its tool_use and tool_result as a call and a `tool` message.
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].path, "/v1/chat/completions");
    let body = requests[1].json();
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["Bash", "Read"]);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "You are Claude Code."})
    );
    assert_eq!(messages[2]["tool_calls"][0]["function"]["name"], "Bash");
    assert_eq!(
        (&messages[3]["role"], &messages[3]["content"]),
        (&json!("tool"), &json!("a.txt b.txt"))
    );
}

/// An Anthropic upstream's answer to a request: streamed when it asks for a stream (as
/// buddy's own requests do), else a whole message (as a passed-through `stream: false`).
fn anthropic_answer(
    request: &HttpRequest,
    text: &str,
    calls: &[(&str, &str, &str)],
) -> MockResponse {
    if request.json()["stream"] == true {
        return MockResponse::sse(anthropic_sse(text, calls));
    }
    let mut content = Vec::new();
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    for (id, name, input) in calls {
        let input: Value = serde_json::from_str(input).unwrap();
        content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    MockResponse::json(
        200,
        &json!({"id": "msg_up", "type": "message", "role": "assistant", "model": "upstream",
                "content": content, "stop_reason": stop, "stop_sequence": null,
                "usage": {"input_tokens": 20, "output_tokens": 10}}),
    )
}

fn anthropic_provider(upstream: &MockServer) -> Arc<dyn Provider> {
    let provider = AnthropicProvider::new(AnthropicOptions {
        name: "anthropic".into(),
        base_url: upstream.url(),
        api_key: Some("sk-ant-upstream".into()),
        headers: Default::default(),
        http: Default::default(),
        stream: true,
        max_output_tokens: None,
        cache: None,
    })
    .unwrap();
    Arc::new(provider)
}

#[tokio::test]
async fn claude_codes_request_is_answered_through_an_anthropic_upstream() {
    let upstream = MockServer::start(|request, n| match n {
        0 => anthropic_answer(request, "", &[("toolu_1", "Bash", r#"{"command":"ls"}"#)]),
        _ => anthropic_answer(request, "Two files: a.txt and b.txt.", &[]),
    })
    .await;
    let reply = two_round_trips(&state(anthropic_provider(&upstream))).await;
    assert_eq!(reply["content"][0]["text"], "Two files: a.txt and b.txt.");
    let requests = upstream.requests();
    assert_eq!(requests[1].path, "/v1/messages");
    assert_eq!(requests[1].header("x-api-key"), Some("sk-ant-upstream"));
    let body = requests[1].json();
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"][0]["type"], "tool_result", "{body}");
}

#[tokio::test]
async fn a_clients_request_reaches_an_anthropic_upstream_byte_for_byte() {
    let upstream = MockServer::start(|request, _| {
        anthropic_answer(request, "", &[("toolu_9", "Bash", r#"{"command":"ls"}"#)])
    })
    .await;
    let state = state(anthropic_provider(&upstream));
    // Claude Code's kind of request: cache marks, a thinking block with its signature,
    // fields buddy does not know, and its own spacing and key order.
    let raw = r#"{"max_tokens": 32000, "model":"upstream",
  "system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral","ttl":"1h"}}],
  "messages":[{"role":"user","content":[{"type":"text","text":"What is here?","cache_control":{"type":"ephemeral"}}]},
    {"role":"assistant","content":[{"type":"thinking","thinking":"Look first.","signature":"EqQBCkYIBxgCKkD+sig=="},{"type":"text","text":"Looking."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"pwd"}}]},
    {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"/work"}]}],
  "tools":[{"name":"Bash","description":"Run a command","input_schema":{"type":"object","properties":{"command":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}],
  "thinking":{"type":"enabled","budget_tokens":1024},
  "context_management":{"edits":[{"type":"clear_thinking_20251015"}]},
  "metadata":{"user_id":"user_1"}, "stream": false}"#;
    // Its beta features go with it: the body's `context_management` needs one.
    let beta = "claude-code-20250219,context-management-2025-06-27";
    let request = axum::http::Request::post("/v1/messages")
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", beta)
        .body(axum::body::Body::from(raw))
        .unwrap();
    let sent = send(&state, request).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    let reply: Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(reply["stop_reason"], "tool_use", "{reply}");
    let requests = upstream.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(String::from_utf8_lossy(&requests[0].body), raw);
    assert_eq!(requests[0].header("x-api-key"), Some("sk-ant-upstream"));
    assert_eq!(requests[0].header("anthropic-beta"), Some(beta));
    assert_eq!(requests[0].header("anthropic-version"), Some("2023-06-01"));
}

#[tokio::test]
async fn when_buddy_ends_the_turn_its_own_final_call_is_sent_not_the_clients() {
    // The history already holds eight identical rounds (warn-then-end's last): buddy's
    // guards end the turn before the model is asked to go on, and the final-answer call
    // is buddy's.
    let upstream = MockServer::start(|request, _| {
        anthropic_answer(request, "The build fails the same way each time.", &[])
    })
    .await;
    let state = state(anthropic_provider(&upstream));
    let mut history = vec![json!({"role": "user", "content": "Make the build pass."})];
    for n in 0..8 {
        history.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("toolu_{n}"), "name": "Bash", "input": {"command": "make"}}]}));
        history.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{n}"), "content": "make: *** No targets."}]}));
    }
    let sent = send(&state, claude_code(&history)).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    assert_eq!(sent.headers["buddy-stop-reason"], "loop_detected");
    let reply: Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(reply["stop_reason"], "end_turn");
    let requests = upstream.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].json();
    assert_eq!(body["tool_choice"], json!({"type": "none"}), "{body}");
}

/// Claude Code's kind of request asking `tool_choice`, to an OpenAI-compatible upstream
/// that answers with two calls: what the upstream was asked, and the reply.
async fn with_tool_choice(choice: Value) -> (Value, super::messages::Sent) {
    let upstream = MockServer::sequence(vec![MockResponse::sse(openai_sse(
        "",
        &[
            ("call_1", "Read", r#"{"file_path":"a.txt"}"#),
            ("call_2", "Read", r#"{"file_path":"b.txt"}"#),
        ],
    ))])
    .await;
    let provider = OpenAiProvider::new(OpenAiOptions {
        base_url: format!("{}/v1", upstream.url()),
        ..OpenAiOptions::default()
    })
    .unwrap();
    let state = state(Arc::new(provider));
    let history = [json!({"role": "user", "content": "Read both files."})];
    let mut request = claude_code(&history);
    let mut body: Value = serde_json::from_slice(
        &axum::body::to_bytes(std::mem::take(request.body_mut()), usize::MAX)
            .await
            .unwrap(),
    )
    .unwrap();
    body["tool_choice"] = choice;
    *request.body_mut() = axum::body::Body::from(body.to_string());
    let sent = send(&state, request).await;
    let asked = upstream
        .requests()
        .first()
        .map_or(Value::Null, HttpRequest::json);
    (asked, sent)
}

#[tokio::test]
async fn tool_choice_is_honoured_through_an_openai_compatible_upstream() {
    // `tool`: that tool alone is offered, and asked for; one call at a time keeps the first.
    let choice = json!({"type": "tool", "name": "Read", "disable_parallel_tool_use": true});
    let (asked, sent) = with_tool_choice(choice).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    assert_eq!(asked["tool_choice"], "required", "{asked}");
    let offered: Vec<&str> = asked["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["Read"]);
    let reply: Value = serde_json::from_str(&sent.body).unwrap();
    let calls: Vec<&Value> = reply["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .collect();
    assert_eq!(calls.len(), 1, "{reply}");
    assert_eq!(calls[0]["input"], json!({"file_path": "a.txt"}));
    let warning = sent.headers["buddy-warning"].to_str().unwrap();
    assert!(
        !warning.contains("tool"),
        "honoured, not warned of: {warning}"
    );
    // `any`: every tool offered, one asked for; both calls kept.
    let (asked, sent) = with_tool_choice(json!({"type": "any"})).await;
    assert_eq!(asked["tool_choice"], "required", "{asked}");
    assert_eq!(asked["tools"].as_array().unwrap().len(), 2);
    let reply: Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(reply["content"].as_array().unwrap().len(), 2, "{reply}");
    // `none`: no tool offered.
    let (asked, _) = with_tool_choice(json!({"type": "none"})).await;
    assert_eq!(asked.get("tools"), None, "{asked}");
    // A tool the request does not declare: Anthropic's 400, and no model call.
    let (asked, sent) = with_tool_choice(json!({"type": "tool", "name": "Grep"})).await;
    assert_eq!(sent.status, StatusCode::BAD_REQUEST);
    let error: Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(
        error,
        json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": "tool_choice: the request's tools have no tool named `Grep`"},
            "request_id": null})
    );
    assert_eq!(asked, Value::Null);
}

/// A passed-through request with thinking on, as Claude Code sends one, `stream` or not.
fn thinking_request(stream: bool) -> axum::http::Request<axum::body::Body> {
    let body = json!({"model": "upstream", "max_tokens": 2048, "stream": stream,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [{"name": "Bash", "description": "Run a command",
                   "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
        "messages": [{"role": "user", "content": "Is it safe to cross?"}]});
    axum::http::Request::post("/v1/messages")
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "interleaved-thinking-2025-05-14")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap()
}

#[tokio::test]
async fn the_upstreams_thinking_blocks_reach_the_client_with_their_signatures() {
    // Whole: thinking (signed), redacted thinking, then a call, as Anthropic answers.
    let upstream = MockServer::start(|_, _| {
        MockResponse::json(
            200,
            &json!({"id": "msg_up", "type": "message", "role": "assistant", "model": "upstream",
                "content": [
                    {"type": "thinking", "thinking": "Check first.", "signature": "EqQBsig=="},
                    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 20, "output_tokens": 10}}),
        )
    })
    .await;
    let whole = state(anthropic_provider(&upstream));
    let sent = send(&whole, thinking_request(false)).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    let reply: Value = serde_json::from_str(&sent.body).unwrap();
    let content = reply["content"].as_array().unwrap();
    assert_eq!(
        content[..2],
        [
            json!({"type": "thinking", "thinking": "Check first.", "signature": "EqQBsig=="}),
            json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"})
        ]
    );
    assert_eq!(content[2]["type"], "tool_use", "{reply}");
    // Claude Code sends them back with the call's result: they reach the upstream as sent.
    let next = json!({"model": "upstream", "max_tokens": 2048, "stream": false,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "Is it safe to cross?"},
            {"role": "assistant", "content": content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "road"}]}]});
    let request = axum::http::Request::post("/v1/messages")
        .header("anthropic-version", "2023-06-01")
        .body(axum::body::Body::from(next.to_string()))
        .unwrap();
    let _ = send(&whole, request).await;
    // (The first call of the turn is the client's; what follows is buddy's own.)
    let requests = upstream.requests();
    assert_eq!(String::from_utf8_lossy(&requests[1].body), next.to_string());
    // Streamed: Anthropic's own recording of a thinking reply, its signature passed on.
    let recording = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures/streams/anthropic_thinking_then_text.sse"
    ))
    .unwrap();
    let signature = recording
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find_map(|e| e["delta"]["signature"].as_str().map(str::to_owned))
        .unwrap();
    let upstream = MockServer::start(move |_, _| MockResponse::sse(recording.clone())).await;
    let streaming = state(anthropic_provider(&upstream));
    let sent = send(&streaming, thinking_request(true)).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    let streamed = super::messages::events(&sent.body);
    let starts: Vec<&Value> = streamed
        .iter()
        .filter(|(name, _)| name == "content_block_start")
        .map(|(_, data)| &data["content_block"]["type"])
        .collect();
    assert_eq!(
        starts,
        [&json!("thinking"), &json!("text")],
        "{}",
        sent.body
    );
    let delta = |kind: &str| {
        streamed
            .iter()
            .filter(|(_, data)| data["delta"]["type"] == kind)
            .map(|(_, data)| data["index"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(delta("signature_delta"), [json!(0)]);
    let signed = streamed
        .iter()
        .find_map(|(_, data)| data["delta"]["signature"].as_str());
    assert_eq!(signed, Some(signature.as_str()));
    let thought = streamed
        .iter()
        .find_map(|(_, data)| data["delta"]["thinking"].as_str())
        .unwrap();
    assert!(
        thought.starts_with("This is a straightforward question about pedestrian safety"),
        "{thought}"
    );
    assert!(delta("text_delta").iter().all(|i| *i == json!(1)));
}
