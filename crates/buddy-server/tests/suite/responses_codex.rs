//! The Responses API takes what codex sends (issue 54, item 4): a real `codex exec`
//! request (codex 0.169.0, captured against a local listener) with its function tools, a
//! `namespace` tool, a hosted `web_search` tool, `store: false`,
//! `include: ["reasoning.encrypted_content"]`, `client_metadata` and `prompt_cache_key`;
//! namespaced calls go back with their `namespace`, custom tools as `custom_tool_call`.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use buddy_core::{CompletionRequest, Message, ProviderError, ToolCall};
use buddy_testkit::reply_tokens;
use serde_json::{Value, json};

use super::messages::{Tokens, events, send, server};

/// codex's first request of `codex exec "List the files here."`, as it sent it.
fn codex_request() -> Value {
    let text = include_str!("../fixtures/codex_0.169.0_exec_request.json");
    let mut body: Value = serde_json::from_str(text).unwrap();
    body["model"] = json!("claude-test");
    body
}

fn responses(body: &Value) -> Request<Body> {
    Request::post("/v1/responses")
        .header("content-type", "application/json")
        .header("authorization", "Bearer sk-codex")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// Spawns an agent through the namespaced tool, then patches through the custom tool,
/// then answers; the tools the model was offered are checked on the first call.
fn agentic(request: &CompletionRequest<'_>, _: usize) -> Result<Tokens, ProviderError> {
    let results = request
        .messages
        .iter()
        .filter(|m| matches!(m, Message::Tool { .. }))
        .count();
    let offered: Vec<&str> = request
        .tools
        .unwrap_or_default()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert!(offered.contains(&"exec_command"), "{offered:?}");
    assert!(
        offered.contains(&"multi_agent_v1__spawn_agent"),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|n| n.contains("web_search")),
        "{offered:?}"
    );
    Ok(match results {
        0 => reply_tokens(
            "",
            vec![ToolCall::new(
                "call_1",
                "multi_agent_v1__spawn_agent",
                r#"{"message":"look"}"#,
            )],
        ),
        _ => reply_tokens("Two files: a.txt and b.txt.", vec![]),
    })
}

#[tokio::test]
async fn a_real_codex_request_is_served_its_namespaced_call_handed_back_and_resumed() {
    let (state, calls) = server(&["sk-codex"], agentic);
    let mut body = codex_request();
    body["stream"] = json!(false);
    let sent = send(&state, responses(&body)).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    assert!(
        sent.headers["buddy-warning"]
            .to_str()
            .unwrap()
            .contains("web_search")
    );
    let response: Value = serde_json::from_str(&sent.body).unwrap();
    let call = response["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call")
        .cloned()
        .unwrap_or_else(|| panic!("{response}"));
    assert_eq!(
        (&call["name"], &call["namespace"]),
        (&json!("spawn_agent"), &json!("multi_agent_v1"))
    );
    assert_eq!(response["store"], false);
    // codex is stateless (`store: false`): it sends the whole input again with the call
    // and its output.
    let input = body["input"].as_array_mut().unwrap();
    input.push(
        json!({"type": "function_call", "call_id": call["call_id"], "name": "spawn_agent",
                      "namespace": "multi_agent_v1", "arguments": call["arguments"]}),
    );
    input.push(json!({"type": "reasoning", "summary": [], "encrypted_content": "gAAAA-opaque"}));
    input.push(json!({"type": "function_call_output", "call_id": call["call_id"], "output": "a.txt b.txt"}));
    let sent = send(&state, responses(&body)).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    let response: Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(response["status"], "completed");
    let text = response["output"].as_array().unwrap().last().unwrap()["content"][0]["text"].clone();
    assert_eq!(text, "Two files: a.txt and b.txt.");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn codexs_streamed_request_streams_the_namespaced_call() {
    let (state, _) = server(&[], agentic);
    let body = codex_request();
    assert_eq!(body["stream"], true);
    let sent = send(&state, responses(&body)).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    let done: Vec<Value> = events(&sent.body)
        .into_iter()
        .filter(|(name, _)| name == "response.output_item.done")
        .map(|(_, data)| data["item"].clone())
        .collect();
    assert!(
        done.iter()
            .any(|i| i["type"] == "function_call" && i["namespace"] == "multi_agent_v1"),
        "{done:?}"
    );
}

#[tokio::test]
async fn custom_tools_are_offered_as_functions_and_handed_back_as_custom_tool_calls() {
    let (state, _) = server(&[], |request, _| {
        let answered = request
            .messages
            .iter()
            .any(|m| matches!(m, Message::Tool { .. }));
        Ok(match answered {
            false => reply_tokens(
                "",
                vec![ToolCall::new(
                    "call_p",
                    "apply_patch",
                    r#"{"input":"*** Begin Patch\n*** End Patch"}"#,
                )],
            ),
            true => reply_tokens("Patched.", vec![]),
        })
    });
    let tools = json!([{"type": "custom", "name": "apply_patch", "description": "Edit files",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch"}},
        {"type": "file_search", "vector_store_ids": ["vs_1"]}]);
    let mut body = json!({"model": "claude-test", "store": false, "tools": tools,
        "input": [{"role": "user", "content": "Fix it."}]});
    let sent = send(&state, responses(&body)).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    assert!(
        sent.headers["buddy-warning"]
            .to_str()
            .unwrap()
            .contains("file_search")
    );
    let response: Value = serde_json::from_str(&sent.body).unwrap();
    let call = response["output"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(call["type"], "custom_tool_call", "{response}");
    assert_eq!(call["input"], "*** Begin Patch\n*** End Patch");
    let input = body["input"].as_array_mut().unwrap();
    input.push(
        json!({"type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch",
                      "input": call["input"]}),
    );
    input.push(json!({"type": "custom_tool_call_output", "call_id": "call_p", "output": "Done!"}));
    let sent = send(&state, responses(&body)).await;
    let response: Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(response["status"], "completed", "{response}");
    let last = response["output"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"][0]["text"], "Patched.");
}
