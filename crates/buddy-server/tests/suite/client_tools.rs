//! Loops through tools the client runs. Each round trip is a new request to the OpenAI
//! endpoint, but it resumes the same turn: the rounds the client ran count against the
//! turn's budget and go through the same guards as server-side calls, so a client-tool
//! loop ends within the bounds buddy keeps for its own tools.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::StatusCode;
use buddy_core::{ToolCall, ToolChoice};
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_server::{AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::SqliteStore;
use buddy_testkit::{ReplyProvider, TestToolbox, reply_tokens};
use serde_json::{Value, json};

use super::{post, send};

/// A model that keeps calling the client's `lookup_customer` (arguments from `args`,
/// given the call number) and answers only when no tools are offered.
struct Looping {
    args: fn(usize) -> String,
    calls: Arc<AtomicUsize>,
}

impl Backend for Looping {
    fn models(&self) -> Vec<String> {
        vec!["looper".into()]
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        let (args, calls) = (self.args, Arc::clone(&self.calls));
        let provider = ReplyProvider::new(move |request, _| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let offered = request.tools.is_some_and(|t| !t.is_empty())
                && request.tool_choice != Some(ToolChoice::None);
            Ok(match offered {
                true => reply_tokens(
                    "",
                    vec![ToolCall::new(
                        format!("call_{n}"),
                        "lookup_customer",
                        args(n),
                    )],
                ),
                false => reply_tokens("I could not find that customer.", vec![]),
            })
        });
        Ok(Resolved {
            provider: Arc::new(provider),
            toolbox: Arc::new(TestToolbox::new()),
            model: "looper".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

/// A server whose model loops with `args`, and its count of model calls.
fn looping_server(args: fn(usize) -> String) -> (AppState, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let state = AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Looping {
            args,
            calls: Arc::clone(&calls),
        }),
        PolicyConfig::default(),
        ServerSettings::default(),
    );
    (state, calls)
}

/// Plays the client: runs every `lookup_customer` call (always "no such customer") and
/// sends the results back, until the reply is an answer or 30 round trips pass.
/// Returns the round trips and the final reply.
async fn client_loop(args: fn(usize) -> String) -> (usize, usize, Value) {
    let (state, calls) = looping_server(args);
    let tools = json!([{"type": "function", "function": {"name": "lookup_customer",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}]);
    let mut messages = vec![json!({"role": "user", "content": "Find the customer Ada."})];
    for trip in 1..=30 {
        let (status, body) = send(
            &state,
            post(
                "/v1/chat/completions",
                json!({"model": "looper", "messages": messages, "tools": tools}),
                None,
            ),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let reply: Value = serde_json::from_str(&body).unwrap();
        let choice = &reply["choices"][0];
        if choice["finish_reason"] != "tool_calls" {
            return (trip, calls.load(Ordering::SeqCst), reply);
        }
        let message = choice["message"].clone();
        messages.push(message.clone());
        for call in message["tool_calls"].as_array().unwrap() {
            messages.push(json!({"role": "tool", "tool_call_id": call["id"],
                "content": "no customer matches that query"}));
        }
    }
    panic!("the client-tool loop was never ended");
}

#[tokio::test]
async fn identical_client_tool_calls_are_ended_like_server_side_ones() {
    let (trips, model_calls, reply) = client_loop(|_| r#"{"query":"Ada"}"#.to_owned()).await;
    // Server-side, an undeclared skill repeating with the same result is warned at its fifth
    // identical result and ended at its eighth, 9 model calls (4 for one declared pure);
    // across round trips, the same.
    assert!(
        model_calls <= 9,
        "{model_calls} model calls over {trips} round trips"
    );
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");
    assert!(
        reply["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .contains("could not find"),
        "{reply}"
    );
}

#[tokio::test]
async fn growing_junk_arguments_through_a_client_tool_are_ended_too() {
    let (trips, model_calls, reply) =
        client_loop(|n| format!(r#"{{"query":"Ada {}"}}"#, "and more ".repeat(n))).await;
    // A query growing word by word: a note at the fifth and the sixth such call, then
    // Finalize (warn, then end), within 9 model calls.
    assert!(
        model_calls <= 9,
        "{model_calls} model calls over {trips} round trips"
    );
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn the_budget_counts_every_round_trip() {
    // Different arguments and different results would never look like a loop; the
    // turn's model-call budget still ends it.
    let (state, calls) = looping_server(|n| format!(r#"{{"query":"customer {n}"}}"#));
    let tools = json!([{"type": "function", "function": {"name": "lookup_customer", "parameters": {"type": "object"}}}]);
    let mut messages = vec![json!({"role": "user", "content": "Find them all."})];
    let mut trips = 0;
    loop {
        trips += 1;
        assert!(trips <= 30, "never ended");
        let (_, body) = send(
            &state,
            post(
                "/v1/chat/completions",
                json!({"model": "looper", "messages": messages, "tools": tools,
                       "buddy_policy": {"max_model_calls": 6}}),
                None,
            ),
        )
        .await;
        let reply: Value = serde_json::from_str(&body).unwrap();
        let message = reply["choices"][0]["message"].clone();
        if reply["choices"][0]["finish_reason"] != "tool_calls" {
            break;
        }
        messages.push(message.clone());
        let call = &message["tool_calls"][0];
        messages.push(json!({"role": "tool", "tool_call_id": call["id"],
            "content": format!("customer record {trips}: nothing relevant")}));
    }
    assert!(
        calls.load(Ordering::SeqCst) <= 6,
        "{} model calls",
        calls.load(Ordering::SeqCst)
    );
}

/// The same loop through the Responses API, resumed each time with
/// `previous_response_id` and the `function_call_output` alone.
async fn responses_loop(args: fn(usize) -> String) -> (usize, usize, Value) {
    let (state, calls) = looping_server(args);
    let tools = json!([{"type": "function", "name": "lookup_customer",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}]);
    let mut body = json!({"model": "looper", "input": "Find the customer Ada.", "tools": tools});
    for trip in 1..=30 {
        let (status, text) = send(&state, post("/v1/responses", body.clone(), None)).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        let response: Value = serde_json::from_str(&text).unwrap();
        let calls_made: Vec<&Value> = response["output"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["type"] == "function_call")
            .collect();
        if calls_made.is_empty() {
            return (trip, calls.load(Ordering::SeqCst), response);
        }
        let outputs: Vec<Value> = calls_made
            .iter()
            .map(|c| {
                json!({"type": "function_call_output", "call_id": c["call_id"],
                "output": "no customer matches that query"})
            })
            .collect();
        body = json!({"model": "looper", "previous_response_id": response["id"],
            "input": outputs, "tools": tools});
    }
    panic!("the client-tool loop was never ended");
}

#[tokio::test]
async fn client_tool_loops_through_the_responses_api_are_ended_too() {
    // The same call with the same result: warned at the fifth, ended at the eighth.
    let (trips, model_calls, response) = responses_loop(|_| r#"{"query":"Ada"}"#.to_owned()).await;
    assert!(
        model_calls <= 9,
        "{model_calls} model calls over {trips} round trips"
    );
    assert_eq!(
        response["buddy"]["stop_reason"], "loop_detected",
        "{response}"
    );
    let (trips, model_calls, _) =
        responses_loop(|n| format!(r#"{{"query":"Ada {}"}}"#, "and more ".repeat(n))).await;
    assert!(
        model_calls <= 9,
        "{model_calls} model calls over {trips} round trips"
    );
}
