//! `POST /v1/messages`, Anthropic's Messages API: whole and streamed replies, the
//! client's tools across round trips, errors in Anthropic's shape, count_tokens and the
//! model list — and the stream set beside Anthropic's own recordings.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use buddy_anthropic_wire::{MessageResponse, StreamEvent};
use buddy_core::{CompletionRequest, Price, ProviderError, Token, ToolCall, ToolChoice, Usd};
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_server::{
    ApiKey, AppState, Backend, BackendError, Resolved, ServerSettings, SpendCeiling, app,
};
use buddy_store::SqliteStore;
use buddy_testkit::{ReplyProvider, TestToolbox, reply_tokens};
use serde_json::{Value, json};
use tower::ServiceExt;

pub(super) type Tokens = Vec<Result<Token, ProviderError>>;
type Reply = dyn Fn(&CompletionRequest<'_>, usize) -> Result<Tokens, ProviderError> + Send + Sync;

/// One model, `claude-test`, whose replies come from a function of the request and the
/// number of the model call (counted over every request the server serves).
struct Model {
    reply: Arc<Reply>,
    calls: Arc<AtomicUsize>,
}

impl Backend for Model {
    fn models(&self) -> Vec<String> {
        vec!["claude-test".into()]
    }

    fn resolve(&self, _: Option<&str>, model: Option<&str>) -> Result<Resolved, BackendError> {
        if model.is_some_and(|m| m != "claude-test") {
            return Err(BackendError(format!(
                "unknown model `{}`",
                model.unwrap_or_default()
            )));
        }
        let (reply, calls) = (Arc::clone(&self.reply), Arc::clone(&self.calls));
        let provider = ReplyProvider::new(move |request, _| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            reply(request, n)
        });
        Ok(Resolved {
            provider: Arc::new(provider),
            toolbox: Arc::new(TestToolbox::new()),
            model: "claude-test".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

/// A server over `reply` with keys `keys`, and its count of model calls.
pub(super) fn server(
    keys: &[&str],
    reply: impl Fn(&CompletionRequest<'_>, usize) -> Result<Tokens, ProviderError>
    + Send
    + Sync
    + 'static,
) -> (AppState, Arc<AtomicUsize>) {
    let settings = ServerSettings {
        api_keys: keys.iter().map(|k| ApiKey::new(k, None, false)).collect(),
        ..ServerSettings::default()
    };
    server_with(settings, reply)
}

/// A server over `reply` with `settings`, and its count of model calls.
fn server_with(
    settings: ServerSettings,
    reply: impl Fn(&CompletionRequest<'_>, usize) -> Result<Tokens, ProviderError>
    + Send
    + Sync
    + 'static,
) -> (AppState, Arc<AtomicUsize>) {
    server_on(Arc::new(SqliteStore::in_memory().unwrap()), settings, reply)
}

/// A server on `store` over `reply` with `settings`, and its count of model calls.
pub(super) fn server_on(
    store: Arc<dyn buddy_store::Store>,
    settings: ServerSettings,
    reply: impl Fn(&CompletionRequest<'_>, usize) -> Result<Tokens, ProviderError>
    + Send
    + Sync
    + 'static,
) -> (AppState, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let state = AppState::new(
        store,
        Arc::new(Model {
            reply: Arc::new(reply),
            calls: Arc::clone(&calls),
        }),
        PolicyConfig::default(),
        settings,
    );
    (state, calls)
}

/// Calls the client's tool when tools are offered, else answers.
pub(super) fn calls_bash(
    request: &CompletionRequest<'_>,
    n: usize,
) -> Result<Tokens, ProviderError> {
    let offered = request
        .tools
        .is_some_and(|t| t.iter().any(|s| s.name == "Bash"))
        && request.tool_choice != Some(ToolChoice::None);
    let answered = request
        .messages
        .last()
        .is_some_and(|m| matches!(m, buddy_core::Message::Tool { .. }));
    Ok(match offered && !answered {
        true => reply_tokens(
            "Let me look.",
            vec![ToolCall::new(
                format!("toolu_{n}"),
                "Bash",
                r#"{"command":"ls"}"#,
            )],
        ),
        false => reply_tokens("There are two files.", vec![]),
    })
}

pub(super) struct Sent {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: String,
}

pub(super) async fn send(state: &AppState, request: Request<Body>) -> Sent {
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22)
        .await
        .unwrap();
    Sent {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// A Messages request as the Anthropic SDK sends it (`x-api-key`, `anthropic-version`).
fn messages(body: Value, key: Option<&str>) -> Request<Body> {
    let mut builder = Request::post("/v1/messages")
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01");
    if let Some(key) = key {
        builder = builder.header("x-api-key", key);
    }
    builder.body(Body::from(body.to_string())).unwrap()
}

pub(super) fn bash_tool() -> Value {
    json!([{"name": "Bash", "description": "Run a shell command",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}},
                             "required": ["command"]}}])
}

/// The events of an SSE body, as (name, data); a data line that is not JSON (`[DONE]`)
/// is left out.
pub(super) fn events(body: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut name = String::new();
    for line in body.lines() {
        if let Some(n) = line.strip_prefix("event: ") {
            name = n.to_owned();
        } else if let Some(data) = line.strip_prefix("data: ")
            && let Ok(data) = serde_json::from_str(data)
        {
            out.push((name.clone(), data));
        }
    }
    out
}

#[tokio::test]
async fn a_whole_reply_is_an_anthropic_message_with_buddys_stop_reason_in_a_header() {
    let (state, _) = server(&["sk-a"], calls_bash);
    let body = json!({"model": "claude-test", "max_tokens": 100,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "What is here?"}]});
    let sent = send(&state, messages(body, Some("sk-a"))).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    let reply: MessageResponse = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(reply.stop_reason.as_deref(), Some("end_turn"));
    assert_eq!(reply.model, "claude-test");
    assert!(reply.id.starts_with("msg_"));
    let raw: Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(
        raw["content"],
        json!([{"type": "text", "text": "There are two files.", "citations": null}])
    );
    assert_eq!(sent.headers["buddy-stop-reason"], "completed");
    assert!(
        sent.headers["buddy-warning"]
            .to_str()
            .unwrap()
            .contains("1 cache_control marks not carried")
    );
}

#[tokio::test]
async fn the_clients_tools_come_back_as_tool_use_and_its_results_finish_the_turn() {
    let (state, calls) = server(&[], calls_bash);
    let mut history = vec![json!({"role": "user", "content": "What is here?"})];
    let first = send(
        &state,
        messages(
            json!({"model": "claude-test", "max_tokens": 100, "tools": bash_tool(), "messages": history}),
            None,
        ),
    )
    .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let reply: Value = serde_json::from_str(&first.body).unwrap();
    assert_eq!(reply["stop_reason"], "tool_use");
    assert_eq!(
        reply["content"],
        json!([{"type": "text", "text": "Let me look.", "citations": null},
               {"type": "tool_use", "id": "toolu_0", "name": "Bash", "input": {"command": "ls"},
                "caller": {"type": "direct"}}])
    );
    assert_eq!(first.headers["buddy-stop-reason"], "client_tool_calls");
    history.push(json!({"role": "assistant", "content": reply["content"]}));
    history.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_0", "content": [{"type": "text", "text": "a.txt b.txt"}]}]}));
    let second = send(
        &state,
        messages(
            json!({"model": "claude-test", "max_tokens": 100, "tools": bash_tool(), "messages": history}),
            None,
        ),
    )
    .await;
    let reply: Value = serde_json::from_str(&second.body).unwrap();
    assert_eq!(reply["stop_reason"], "end_turn", "{reply}");
    assert_eq!(reply["content"][0]["text"], "There are two files.");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// Plays Claude Code against a model that runs the client's Bash with the same command
/// forever, answering each call with the same output (`failing`: as an error); returns
/// the round trips, the model calls, the last reply's headers and the reply.
async fn claude_code_loop(failing: bool) -> (usize, usize, axum::http::HeaderMap, Value) {
    let (state, calls) = server(&[], |request, n| {
        let offered = request.tools.is_some_and(|t| !t.is_empty())
            && request.tool_choice != Some(ToolChoice::None);
        Ok(match offered {
            true => reply_tokens(
                "",
                vec![ToolCall::new(
                    format!("toolu_{n}"),
                    "Bash",
                    r#"{"command":"make test"}"#,
                )],
            ),
            false => reply_tokens(
                "The tests fail the same way each time: make: *** No rule.",
                vec![],
            ),
        })
    });
    let mut history = vec![json!({"role": "user", "content": "Make the tests pass."})];
    for trip in 1..=30 {
        let body = json!({"model": "claude-test", "max_tokens": 100, "tools": bash_tool(), "messages": history});
        let sent = send(&state, messages(body, None)).await;
        assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
        let reply: Value = serde_json::from_str(&sent.body).unwrap();
        if reply["stop_reason"] != "tool_use" {
            return (trip, calls.load(Ordering::SeqCst), sent.headers, reply);
        }
        let call = reply["content"].as_array().unwrap().last().unwrap().clone();
        history.push(json!({"role": "assistant", "content": reply["content"]}));
        // As Claude Code sends it: the result, and a reminder beside it.
        history.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call["id"], "is_error": failing,
             "content": "make: *** No rule to make target 'test'.  Stop."},
            {"type": "text", "text": "<system-reminder>keep going</system-reminder>"}]}));
    }
    panic!("the client-tool loop was never ended");
}

#[tokio::test]
async fn a_client_tool_loop_is_ended_with_an_ordinary_answer_across_round_trips() {
    // The same command, the same output: the repetition guard warns at the fifth and ends
    // it at the eighth, as server-side (an identical repeat within 9 model calls).
    let (trips, model_calls, headers, reply) = claude_code_loop(false).await;
    assert_eq!(reply["stop_reason"], "end_turn");
    assert!(
        reply["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("fail"),
        "{reply}"
    );
    assert_eq!(headers["buddy-stop-reason"], "loop_detected");
    assert!(
        model_calls <= 9,
        "{model_calls} model calls over {trips} round trips"
    );
    // The same command failing: its circuit breaker withdraws it after three failures
    // and the model, offered no tools, answers.
    let (trips, model_calls, headers, reply) = claude_code_loop(true).await;
    assert_eq!(reply["stop_reason"], "end_turn");
    assert!(
        reply["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("fail"),
        "{reply}"
    );
    assert!(headers.contains_key("buddy-stop-reason"));
    assert!(
        model_calls <= 4,
        "{model_calls} model calls over {trips} round trips"
    );
}

/// The shape of a stream: each event's name with its block or delta type, pings left out
/// and runs of the same delta counted once (text comes in as many pieces as it likes).
fn shape(events: &[(String, Value)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (name, data) in events {
        let kind = data["content_block"]["type"]
            .as_str()
            .or_else(|| data["delta"]["type"].as_str())
            .or_else(|| data["delta"]["stop_reason"].as_str());
        let step = match kind {
            Some(kind) => format!("{name}:{kind}"),
            None => name.clone(),
        };
        if name == "ping" || out.last() == Some(&step) {
            continue;
        }
        out.push(step);
    }
    out
}

#[tokio::test]
async fn a_streamed_reply_has_the_shape_and_fields_of_anthropics_own_recording() {
    let (state, _) = server(&[], calls_bash);
    let sent = send(
        &state,
        messages(
            json!({"model": "claude-test", "max_tokens": 100, "stream": true, "tools": bash_tool(),
                   "messages": [{"role": "user", "content": "What is here?"}]}),
            None,
        ),
    )
    .await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    assert_eq!(sent.headers["content-type"], "text/event-stream");
    let ours = events(&sent.body);
    for (name, data) in &ours {
        let event: StreamEvent = serde_json::from_value(data.clone()).unwrap();
        assert_eq!(event.name(), name);
    }
    let recorded = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../buddy-providers/tests/fixtures/streams/anthropic_text_then_tool_use.sse"
    ))
    .unwrap();
    let theirs = events(&recorded);
    assert_eq!(shape(&ours), shape(&theirs));
    // Every field Anthropic sends in the message and the usage, buddy sends too.
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let our_keys = keys(&ours[0].1["message"]);
    for key in keys(&theirs[0].1["message"]) {
        assert!(our_keys.contains(&key), "{key} missing from {our_keys:?}");
    }
    let usage_keys = keys(&ours[0].1["message"]["usage"]);
    for key in [
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ] {
        assert!(usage_keys.contains(&key.to_owned()), "{key}");
    }
    let (_, last_delta) = ours
        .iter()
        .rev()
        .find(|(n, _)| n == "message_delta")
        .unwrap();
    assert_eq!(last_delta["delta"]["stop_reason"], "tool_use");
    let transcript: Vec<String> = ours
        .iter()
        .map(|(name, data)| {
            let mut data = data.clone();
            if let Some(id) = data.pointer_mut("/message/id") {
                *id = json!("msg_ID");
            }
            format!("{name} {data}")
        })
        .collect();
    insta::assert_snapshot!(transcript.join("\n"));
}

#[tokio::test]
async fn errors_come_in_anthropics_shape_and_status() {
    let (state, _) = server(&["sk-a"], calls_bash);
    let ok_body = json!({"model": "claude-test", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    let cases = [
        (
            messages(ok_body.clone(), Some("sk-wrong")),
            401,
            "authentication_error",
        ),
        (
            messages(
                json!({"model": "claude-test", "messages": []}),
                Some("sk-a"),
            ),
            400,
            "invalid_request_error",
        ),
        (
            messages(
                json!({"model": "claude-test", "max_tokens": 10,
                "messages": [{"role": "robot", "content": "hi"}]}),
                Some("sk-a"),
            ),
            400,
            "invalid_request_error",
        ),
        (
            messages(
                json!({"model": "claude-test", "max_tokens": 10, "top_k": 3,
                "messages": [{"role": "user", "content": "hi"}]}),
                Some("sk-a"),
            ),
            400,
            "invalid_request_error",
        ),
        (
            messages(
                json!({"model": "gpt-9", "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}]}),
                Some("sk-a"),
            ),
            400,
            "invalid_request_error",
        ),
        (
            Request::post("/v1/messages/batches")
                .header("x-api-key", "sk-a")
                .body(Body::empty())
                .unwrap(),
            404,
            "not_found_error",
        ),
    ];
    for (request, status, kind) in cases {
        let sent = send(&state, request).await;
        assert_eq!(sent.status.as_u16(), status, "{}", sent.body);
        let body: Value = serde_json::from_str(&sent.body).unwrap();
        assert_eq!(body["type"], "error", "{body}");
        assert_eq!(body["error"]["type"], kind, "{body}");
        assert!(!body["error"]["message"].as_str().unwrap().is_empty());
    }
    // A bearer key works as well as x-api-key.
    let bearer = Request::post("/v1/messages")
        .header("authorization", "Bearer sk-a")
        .body(Body::from(ok_body.to_string()))
        .unwrap();
    assert_eq!(send(&state, bearer).await.status, StatusCode::OK);
    // The OpenAI endpoints keep their own shape.
    let openai = Request::get("/v1/conversations")
        .body(Body::empty())
        .unwrap();
    let body: Value = serde_json::from_str(&send(&state, openai).await.body).unwrap();
    assert_eq!(body["error"]["type"], "authentication_error");
    assert!(body.get("type").is_none());
}

#[tokio::test]
async fn an_overloaded_model_server_is_a_529_whole_and_an_overloaded_error_event_streamed() {
    let (state, _) = server(&[], |_, _| {
        Err(ProviderError::Http {
            provider: "anthropic".into(),
            url: "http://127.0.0.1:9/v1/messages".into(),
            status: 529,
            message:
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
                    .into(),
            retry_after: None,
        })
    });
    let body = json!({"model": "claude-test", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    let sent = send(&state, messages(body.clone(), None)).await;
    assert_eq!(sent.status.as_u16(), 529, "{}", sent.body);
    let error: Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(error["error"]["type"], "overloaded_error");
    let mut streamed = body;
    streamed["stream"] = json!(true);
    let sent = send(&state, messages(streamed, None)).await;
    let events = events(&sent.body);
    let (name, data) = events.last().unwrap();
    assert_eq!(name, "error");
    assert_eq!(data["error"]["type"], "overloaded_error");
}

#[tokio::test]
async fn tokens_are_counted_and_models_listed_in_anthropics_shape() {
    let (state, calls) = server(&[], calls_bash);
    let count = |body: Value| {
        Request::post("/v1/messages/count_tokens")
            .header("anthropic-version", "2023-06-01")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let plain =
        json!({"model": "claude-test", "messages": [{"role": "user", "content": "What is here?"}]});
    let sent = send(&state, count(plain.clone())).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    let without: u64 = serde_json::from_str::<Value>(&sent.body).unwrap()["input_tokens"]
        .as_u64()
        .unwrap();
    let mut with_tools = plain;
    with_tools["tools"] = bash_tool();
    let with: u64 = serde_json::from_str::<Value>(&send(&state, count(with_tools)).await.body)
        .unwrap()["input_tokens"]
        .as_u64()
        .unwrap();
    assert!(without > 0 && with > without, "{without} then {with}");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "counting calls no model");
    let bad = send(
        &state,
        count(json!({"model": "claude-test", "messages": [{"role": "x", "content": "y"}]})),
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let list = |anthropic: bool| {
        let mut builder = Request::get("/v1/models");
        if anthropic {
            builder = builder.header("anthropic-version", "2023-06-01");
        }
        builder.body(Body::empty()).unwrap()
    };
    let models: Value = serde_json::from_str(&send(&state, list(true)).await.body).unwrap();
    assert_eq!(
        models,
        json!({"data": [{"type": "model", "id": "claude-test", "display_name": "claude-test",
                         "created_at": "1970-01-01T00:00:00Z", "capabilities": null,
                         "max_input_tokens": null, "max_tokens": null}],
               "has_more": false, "first_id": "claude-test", "last_id": "claude-test"})
    );
    let openai: Value = serde_json::from_str(&send(&state, list(false)).await.body).unwrap();
    assert_eq!(openai["object"], "list");
}

#[tokio::test]
async fn a_key_at_its_spend_ceiling_gets_an_answer_that_ends_the_session_not_an_error() {
    // Each model call costs $0.02 (10 input and 5 output tokens); the key may spend $0.02
    // a day: the first round trip spends it, the second is answered by buddy.
    let mut settings = ServerSettings {
        api_keys: vec![ApiKey::new("sk-a", None, false).with_spend(SpendCeiling {
            daily: Usd::from_dollars(0.02),
            monthly: None,
        })],
        ..ServerSettings::default()
    };
    // $0.02 a call (5 output tokens at $4,000 per million, input free), and each may write
    // 5 tokens: a call's worst case is its cost.
    let price = Price {
        input: 0.0,
        output: 4_000.0,
        cached_input: None,
        cache_write: None,
        cache_write_1h: None,
    };
    settings.prices.add(None, "*", price);
    let (state, calls) = server_with(settings, |_, n| {
        Ok(reply_tokens(
            "",
            vec![ToolCall::new(
                format!("toolu_{n}"),
                "Bash",
                format!(r#"{{"command":"ls {n}"}}"#),
            )],
        ))
    });
    let mut history = vec![json!({"role": "user", "content": "Look around."})];
    let mut ended = None;
    for _ in 0..5 {
        let body = json!({"model": "claude-test", "max_tokens": 5, "tools": bash_tool(), "messages": history});
        let sent = send(&state, messages(body, Some("sk-a"))).await;
        assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
        let reply: Value = serde_json::from_str(&sent.body).unwrap();
        if reply["stop_reason"] != "tool_use" {
            ended = Some((sent.headers, reply));
            break;
        }
        let call = reply["content"].as_array().unwrap().last().unwrap().clone();
        history.push(json!({"role": "assistant", "content": reply["content"]}));
        history.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call["id"], "content": "file"}]}));
    }
    let (headers, reply) = ended.expect("the session was never ended");
    assert_eq!(reply["stop_reason"], "end_turn");
    assert_eq!(headers["buddy-stop-reason"], "cost_budget");
    let text = reply["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("spend ceiling") && text.contains("daily ceiling"),
        "{text}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // Streamed, the same answer as Anthropic's events.
    let body =
        json!({"model": "claude-test", "max_tokens": 5, "stream": true, "messages": history});
    let sent = send(&state, messages(body, Some("sk-a"))).await;
    let streamed = events(&sent.body);
    let names: Vec<&str> = streamed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(streamed[5].1["delta"]["stop_reason"], "end_turn");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "no model call at the ceiling"
    );
}
