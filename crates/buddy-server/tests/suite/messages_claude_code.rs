//! `/v1/messages` takes what Claude Code sends: a real `claude -p` request (Claude Code
//! 2.1.328, captured against a local listener) with its `?beta=true`, its
//! `anthropic-beta` features, system blocks with `cache_control`, a system message between
//! the turns (its environment, after the user's prompt), adaptive thinking, `metadata`,
//! `context_management` and `output_config`, and its twelve tools.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use buddy_core::{CompletionRequest, Message, ProviderError, ToolCall};
use buddy_testkit::reply_tokens;
use serde_json::{Value, json};

use super::messages::{Tokens, events, send, server};

/// Claude Code's first request of `claude -p "What is the answer?"`, as it sent it.
fn claude_code_request() -> Value {
    let text = include_str!("../fixtures/claude_code_2.1.328_request.json");
    let mut body: Value = serde_json::from_str(text).unwrap();
    body["model"] = json!("claude-test");
    body
}

fn messages(body: &Value) -> Request<Body> {
    Request::post("/v1/messages?beta=true")
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .header(
            "anthropic-beta",
            "claude-code-20250219,interleaved-thinking-2025-05-14",
        )
        .header("x-api-key", "sk-claude")
        .header("x-app", "cli")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// Runs Bash once its tools and instructions are all there, then answers.
fn bash_then_answer(request: &CompletionRequest<'_>, _: usize) -> Result<Tokens, ProviderError> {
    let offered: Vec<&str> = request
        .tools
        .unwrap_or_default()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    for tool in ["Bash", "Read", "Edit", "Write", "Agent"] {
        assert!(offered.contains(&tool), "{offered:?}");
    }
    let systems: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::System { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        systems.iter().any(|s| s.starts_with("# Environment")),
        "the system message between the turns is kept: {systems:?}"
    );
    let answered = request
        .messages
        .iter()
        .any(|m| matches!(m, Message::Tool { .. }));
    Ok(match answered {
        false => reply_tokens(
            "",
            vec![ToolCall::new("toolu_1", "Bash", r#"{"command":"ls"}"#)],
        ),
        true => reply_tokens("The answer is in a.txt.", vec![]),
    })
}

#[tokio::test]
async fn a_real_claude_code_request_is_served_and_its_tool_round_trip_finished() {
    let (state, calls) = server(&["sk-claude"], bash_then_answer);
    let mut body = claude_code_request();
    let sent = send(&state, messages(&body)).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    let streamed = events(&sent.body);
    let tool_use = streamed
        .iter()
        .find(|(name, data)| {
            name == "content_block_start" && data["content_block"]["type"] == "tool_use"
        })
        .unwrap_or_else(|| panic!("no tool_use block: {}", sent.body));
    assert_eq!(tool_use.1["content_block"]["name"], "Bash");
    let stop = streamed
        .iter()
        .find(|(name, _)| name == "message_delta")
        .unwrap();
    assert_eq!(stop.1["delta"]["stop_reason"], "tool_use");
    // What buddy does not pass to a translated model server is named, not dropped.
    let warning = sent.headers["buddy-warning"].to_str().unwrap();
    for part in ["cache_control", "context_management", "output_config"] {
        assert!(warning.contains(part), "{part}: {warning}");
    }
    // Claude Code sends the history back with its tool's result.
    let history = body["messages"].as_array_mut().unwrap();
    history.push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]}));
    history.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt", "is_error": false}]}));
    body["stream"] = json!(false);
    let sent = send(&state, messages(&body)).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    let reply: Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(reply["stop_reason"], "end_turn");
    assert_eq!(reply["content"][0]["text"], "The answer is in a.txt.");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}
