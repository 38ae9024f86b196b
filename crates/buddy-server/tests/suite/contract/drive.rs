//! Every OpenAI endpoint buddy implements, driven as a client would: whole and streamed,
//! server-side and client tool calls, reasoning, refusals, background runs, cancels,
//! conversations, and the errors a client can cause.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{Recorder, request};

const CHAT: &str = "POST /v1/chat/completions";
const RESPONSES: &str = "POST /v1/responses";
const RESPONSE: &str = "GET /v1/responses/{response_id}";

pub(super) async fn everything(r: &mut Recorder) {
    models(r).await;
    chat_completions(r).await;
    responses(r).await;
    background_and_cancel(r).await;
    stored_responses(r).await;
    compact(r).await;
    conversations(r).await;
    errors(r).await;
    r.state.wait_for_turns().await;
}

async fn models(r: &mut Recorder) {
    let (status, _) = r.whole("GET /v1/models", "/v1/models", None).await;
    assert_eq!(status, StatusCode::OK);
}

fn weather_tool_chat() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}])
}

fn weather_tool_responses() -> Value {
    json!([{"type": "function", "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}])
}

async fn chat_completions(r: &mut Recorder) {
    let uri = "/v1/chat/completions";
    let hello = json!([{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": "What is the answer?"}]);
    // Whole: a server-side skill ran (reasoning, then the answer), a refusal.
    for model in ["server-tool", "refusal"] {
        let (status, body) = r
            .whole(CHAT, uri, Some(json!({"model": model, "messages": hello})))
            .await;
        assert_eq!(status, StatusCode::OK, "{model}: {body}");
    }
    // A client tool call, then its result sent back.
    let mut messages = vec![json!({"role": "user", "content": "Weather in Paris?"})];
    let (status, called) = r
        .whole(
            CHAT,
            uri,
            Some(
                json!({"model": "client-tool", "messages": messages, "tools": weather_tool_chat()}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{called}");
    assert_eq!(
        called["choices"][0]["finish_reason"], "tool_calls",
        "{called}"
    );
    let message = called["choices"][0]["message"].clone();
    let call_id = message["tool_calls"][0]["id"].clone();
    messages.push(message);
    messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": "sunny"}));
    let (status, answered) = r
        .whole(
            CHAT,
            uri,
            Some(
                json!({"model": "client-tool", "messages": messages, "tools": weather_tool_chat()}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    // Streamed: text, with and without usage; a client tool call; a refusal; a failure.
    for body in [
        json!({"model": "server-tool", "messages": hello, "stream": true}),
        json!({"model": "server-tool", "messages": hello, "stream": true,
               "stream_options": {"include_usage": true}}),
        json!({"model": "client-tool", "messages": [{"role": "user", "content": "Weather?"}],
               "tools": weather_tool_chat(), "stream": true,
               "stream_options": {"include_usage": true}}),
        json!({"model": "refusal", "messages": hello, "stream": true}),
        json!({"model": "broken", "messages": hello, "stream": true}),
    ] {
        r.streamed(CHAT, uri, Some(body), None).await;
    }
}

async fn responses(r: &mut Recorder) {
    let uri = "/v1/responses";
    // Whole: a server-side skill (reasoning, an mcp_call, the answer), instructions, a
    // refusal, and the skill as a function call pair.
    for body in [
        json!({"model": "server-tool", "input": "What is the answer?"}),
        json!({"model": "server-tool", "input": [{"role": "user", "content": "What is the answer?"}],
               "instructions": "Be brief.", "store": false}),
        json!({"model": "refusal", "input": "Do something bad."}),
    ] {
        let (status, body) = r.whole(RESPONSES, uri, Some(body)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // A client function call, then its output sent back after `previous_response_id`.
    let (status, called) = r
        .whole(
            RESPONSES,
            uri,
            Some(json!({"model": "client-tool", "input": "Weather in Paris?",
                        "tools": weather_tool_responses()})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{called}");
    let call = called["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap_or_else(|| panic!("no function_call: {called}"))
        .clone();
    let (status, answered) = r
        .whole(
            RESPONSES,
            uri,
            Some(
                json!({"model": "client-tool", "previous_response_id": called["id"],
                        "tools": weather_tool_responses(),
                        "input": [{"type": "function_call_output", "call_id": call["call_id"],
                                   "output": "sunny"}]}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    // Streamed: the server-side skill, a client function call, a refusal, a failure.
    for body in [
        json!({"model": "server-tool", "input": "What is the answer?", "stream": true}),
        json!({"model": "client-tool", "input": "Weather?", "tools": weather_tool_responses(),
               "stream": true}),
        json!({"model": "refusal", "input": "Do something bad.", "stream": true}),
        json!({"model": "broken", "input": "hi", "stream": true}),
    ] {
        r.streamed(RESPONSES, uri, Some(body), None).await;
    }
}

async fn background_and_cancel(r: &mut Recorder) {
    // A background response that ends, read again whole and as its replayed stream.
    let (status, created) = r
        .whole(
            RESPONSES,
            "/v1/responses",
            Some(
                json!({"model": "server-tool", "input": "What is the answer?", "background": true}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    settle(r, &id).await;
    let (status, done) = r
        .whole(RESPONSE, &format!("/v1/responses/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    // The spec's GET /responses/{id} names no event-stream schema: events are
    // ResponseStreamEvent, as POST /responses streams them.
    r.streamed(
        RESPONSE,
        &format!("/v1/responses/{id}?stream=true"),
        None,
        Some("ResponseStreamEvent"),
    )
    .await;
    let (status, _) = r
        .whole(
            "POST /v1/responses/{response_id}/cancel",
            &format!("/v1/responses/{id}/cancel"),
            Some(json!({})),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "an ended response is not cancelled"
    );
    // One that never ends on its own: cancelled, then read again.
    let (status, held) = r
        .whole(
            RESPONSES,
            "/v1/responses",
            Some(json!({"model": "held", "input": "Wait.", "background": true})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{held}");
    let id = held["id"].as_str().unwrap().to_owned();
    let (status, in_progress) = r
        .whole(RESPONSE, &format!("/v1/responses/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{in_progress}");
    // Cancelled once it has begun to answer: the partial message is kept.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let (status, cancelled) = r
        .whole(
            "POST /v1/responses/{response_id}/cancel",
            &format!("/v1/responses/{id}/cancel"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    settle(r, &id).await;
    let (status, after) = r
        .whole(RESPONSE, &format!("/v1/responses/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(after["output"][0]["status"], "incomplete", "{after}");
    assert_eq!(after["output"][0]["content"][0]["text"], "Let me think");
    // Its replay ends with `response.cancelled` (see `deviations`).
    r.streamed(
        RESPONSE,
        &format!("/v1/responses/{id}?stream=true"),
        None,
        Some("ResponseStreamEvent"),
    )
    .await;
}

/// Waits until response `id` has ended (read without keeping the bodies).
async fn settle(r: &Recorder, id: &str) {
    for _ in 0..400 {
        let (_, text) = super::send(
            &r.state,
            request("GET", &format!("/v1/responses/{id}"), None, true),
        )
        .await;
        let body: Value = serde_json::from_str(&text).unwrap_or_default();
        if !matches!(body["status"].as_str(), Some("queued" | "in_progress")) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("response {id} never ended");
}

async fn stored_responses(r: &mut Recorder) {
    let (_, created) = r
        .whole(
            RESPONSES,
            "/v1/responses",
            Some(json!({"model": "server-tool", "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "What is the answer?"}]}
            ]})),
        )
        .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, _) = r
        .whole(RESPONSE, &format!("/v1/responses/{id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    for query in ["", "?order=asc&limit=1"] {
        let (status, items) = r
            .whole(
                "GET /v1/responses/{response_id}/input_items",
                &format!("/v1/responses/{id}/input_items{query}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{items}");
    }
    // The spec gives DELETE /responses/{id} no body schema: its status only.
    let (status, _) = super::send(
        &r.state,
        request("DELETE", &format!("/v1/responses/{id}"), None, true),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

async fn compact(r: &mut Recorder) {
    let (status, compacted) = r
        .whole(
            "POST /v1/responses/compact",
            "/v1/responses/compact",
            Some(json!({"model": "summary", "input": [
                {"role": "user", "content": "We launch on Tuesday."},
                {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "42"},
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "Tell support first."},
            ]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{compacted}");
}

async fn conversations(r: &mut Recorder) {
    let (status, created) = r
        .whole(
            "POST /v1/conversations",
            "/v1/conversations",
            Some(json!({"items": [
                {"type": "message", "role": "user", "content": "My name is Ada."},
                {"type": "message", "role": "assistant", "content": "Hello Ada."}]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, _) = r
        .whole("POST /v1/conversations", "/v1/conversations", None)
        .await;
    assert_eq!(status, StatusCode::OK, "an empty conversation");
    // A response in it, with a server-side skill and a client function call.
    for body in [
        json!({"model": "server-tool", "conversation": id, "input": "What is the answer?"}),
        json!({"model": "client-tool", "conversation": id, "input": "Weather?",
               "tools": weather_tool_responses()}),
    ] {
        let (status, body) = r.whole(RESPONSES, "/v1/responses", Some(body)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let items = "GET /v1/conversations/{conversation_id}/items";
    for query in ["", "?order=asc", "?limit=1"] {
        let (status, list) = r
            .whole(items, &format!("/v1/conversations/{id}/items{query}"), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{list}");
    }
    let (status, added) = r
        .whole(
            "POST /v1/conversations/{conversation_id}/items",
            &format!("/v1/conversations/{id}/items"),
            Some(json!({"items": [{"type": "message", "role": "user", "content": "One more."}]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{added}");
    let item_id = added["data"][0]["id"].as_str().unwrap().to_owned();
    let (status, read) = r
        .whole(
            "GET /v1/conversations/{conversation_id}/items/{item_id}",
            &format!("/v1/conversations/{id}/items/{item_id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{read}");
    let (status, popped) = r
        .whole(
            "DELETE /v1/conversations/{conversation_id}/items/{item_id}",
            &format!("/v1/conversations/{id}/items/{item_id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{popped}");
    let (status, updated) = r
        .whole(
            "POST /v1/conversations/{conversation_id}",
            &format!("/v1/conversations/{id}"),
            Some(json!({"metadata": {"topic": "weather"}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    let one = "GET /v1/conversations/{conversation_id}";
    let (status, _) = r.whole(one, &format!("/v1/conversations/{id}"), None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, deleted) = r
        .whole(
            "DELETE /v1/conversations/{conversation_id}",
            &format!("/v1/conversations/{id}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    let (status, _) = r.whole(one, &format!("/v1/conversations/{id}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// Errors a client can cause, on each family: each is an `ErrorResponse`.
async fn errors(r: &mut Recorder) {
    let (status, _) = r
        .whole_with("GET /v1/models", request("GET", "/v1/models", None, false))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    for (body, want) in [
        (
            json!({"model": "server-tool", "messages": [{"role": "robot", "content": "x"}]}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"model": "broken", "messages": [{"role": "user", "content": "x"}]}),
            StatusCode::BAD_GATEWAY,
        ),
    ] {
        let (status, error) = r.whole(CHAT, "/v1/chat/completions", Some(body)).await;
        assert_eq!(status, want, "{error}");
    }
    for (body, want) in [
        (json!({"input": 42}), StatusCode::BAD_REQUEST),
        (
            json!({"model": "broken", "input": "hi"}),
            StatusCode::BAD_GATEWAY,
        ),
        (
            json!({"previous_response_id": "resp_nothing", "input": "hi"}),
            StatusCode::NOT_FOUND,
        ),
    ] {
        let (status, error) = r.whole(RESPONSES, "/v1/responses", Some(body)).await;
        assert_eq!(status, want, "{error}");
    }
    let (status, _) = r.whole(RESPONSE, "/v1/responses/resp_nothing", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = r
        .whole(
            "GET /v1/conversations/{conversation_id}/items",
            "/v1/conversations/conv_nothing/items",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = r
        .whole(
            "POST /v1/responses/compact",
            "/v1/responses/compact",
            Some(json!({"input": [{"role": "user", "content": "hi"}]})),
        )
        .await;
    assert!(status.is_client_error(), "{status}");
}
