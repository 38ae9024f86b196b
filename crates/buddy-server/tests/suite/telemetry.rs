//! buddy's traces as a tracing backend receives them: an in-test OTLP/HTTP receiver
//! decodes the exports with the official OTLP protobuf messages, and the spans of a
//! multi-tool turn, a loop, a client-tool round trip and an MCP call are checked — names,
//! parents, GenAI attributes, the caller's trace continued, and the trace context sent
//! on to the model server and in the MCP call's `params._meta`.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use buddy_core::ToolOutcome;
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_providers::{OpenAiOptions, OpenAiProvider};
use buddy_server::{AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::SqliteStore;
use buddy_telemetry::{Telemetry, TelemetryConfig};
use buddy_testkit::{HttpRequest, MockResponse, MockServer, TestTool, TestToolbox, openai_sse};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Value, json};

use super::send;

/// A span as received, with what the checks read.
#[derive(Clone, Debug)]
pub(super) struct Got {
    pub(super) span: Span,
    scope: String,
    schema_url: String,
    service: Option<String>,
}

impl Got {
    pub(super) fn trace(&self) -> String {
        hex(&self.span.trace_id)
    }
    pub(super) fn id(&self) -> String {
        hex(&self.span.span_id)
    }
    pub(super) fn parent(&self) -> String {
        hex(&self.span.parent_span_id)
    }
    fn attr(&self, key: &str) -> Option<Any> {
        self.span
            .attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.clone())
            .and_then(|v| v.value)
    }
    pub(super) fn text(&self, key: &str) -> Option<String> {
        match self.attr(key) {
            Some(Any::StringValue(s)) => Some(s),
            _ => None,
        }
    }
    pub(super) fn int(&self, key: &str) -> Option<i64> {
        match self.attr(key) {
            Some(Any::IntValue(n)) => Some(n),
            _ => None,
        }
    }
    fn texts(&self, key: &str) -> Vec<String> {
        match self.attr(key) {
            Some(Any::ArrayValue(list)) => list
                .values
                .into_iter()
                .filter_map(|v| match v.value {
                    Some(Any::StringValue(s)) => Some(s),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
    /// The `traceparent` that names this span.
    fn traceparent(&self) -> String {
        format!("00-{}-{}-01", self.trace(), self.id())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An OTLP/HTTP receiver on a loopback port: `POST /v1/traces` with protobuf bodies.
pub(super) struct Receiver {
    pub(super) url: String,
    spans: Arc<Mutex<Vec<Got>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(super) async fn receiver() -> Receiver {
    let spans: Arc<Mutex<Vec<Got>>> = Arc::default();
    let kept = Arc::clone(&spans);
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |headers: axum::http::HeaderMap, body: Bytes| {
            let kept = Arc::clone(&kept);
            async move {
                assert_eq!(
                    headers.get("content-type").and_then(|v| v.to_str().ok()),
                    Some("application/x-protobuf")
                );
                let Ok(export) = ExportTraceServiceRequest::decode(body) else {
                    return StatusCode::BAD_REQUEST.into_response();
                };
                for resource in export.resource_spans {
                    let service = resource.resource.as_ref().and_then(|r| {
                        r.attributes
                            .iter()
                            .find(|kv| kv.key == "service.name")
                            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                                Any::StringValue(s) => Some(s.clone()),
                                _ => None,
                            })
                    });
                    for scope in resource.scope_spans {
                        let name = scope.scope.map(|s| s.name).unwrap_or_default();
                        for span in scope.spans {
                            kept.lock().unwrap().push(Got {
                                span,
                                scope: name.clone(),
                                schema_url: scope.schema_url.clone(),
                                service: service.clone(),
                            });
                        }
                    }
                }
                (
                    [("content-type", "application/x-protobuf")],
                    ExportTraceServiceResponse::default().encode_to_vec(),
                )
                    .into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Receiver { url, spans, task }
}

/// The model server: an OpenAI-compatible mock whose replies depend on the first user
/// message and on whether tool results are in yet.
async fn model_server() -> MockServer {
    MockServer::start(|request: &HttpRequest, _| {
        let body = request.json();
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let user = messages
            .iter()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        let results = messages.iter().filter(|m| m["role"] == "tool").count();
        let tools_offered = body["tools"].as_array().is_some_and(|t| !t.is_empty())
            && body["tool_choice"] != "none";
        let sse = match (user.as_str(), results, tools_offered) {
            (_, _, false) => openai_sse("Here is what I found.", &[]),
            ("look up two invoices", 0, _) => openai_sse(
                "Looking both up.",
                &[
                    ("call_a", "lookup", r#"{"invoice":"A-1"}"#),
                    ("call_b", "lookup", r#"{"invoice":"B-2"}"#),
                ],
            ),
            ("keep looking", n, _) => {
                let id = format!("call_{n}");
                openai_sse("", &[(id.as_str(), "lookup", r#"{"invoice":"same"}"#)])
            }
            ("what is the weather", 0, _) => {
                openai_sse("", &[("call_w", "get_weather", r#"{"city":"Paris"}"#)])
            }
            ("probe it", 0, _) => openai_sse("", &[("call_p", "remote__probe", r#"{}"#)]),
            _ => openai_sse("Both invoices are paid.", &[]),
        };
        MockResponse::sse(sse)
    })
    .await
}

/// Serves `mock` as the model, with a `lookup` skill that always answers the same.
struct Modelled {
    base_url: String,
}

impl Backend for Modelled {
    fn models(&self) -> Vec<String> {
        vec!["gpt-4o-mini".into()]
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        let provider = OpenAiProvider::new(OpenAiOptions {
            base_url: self.base_url.clone(),
            ..OpenAiOptions::default()
        })
        .map_err(|e| BackendError(e.to_string()))?;
        let toolbox = TestToolbox::new().with(
            "lookup",
            TestTool::new(|call, _| ToolOutcome::ok(format!("{} is paid", call.arguments))),
        );
        Ok(Resolved {
            provider: Arc::new(provider),
            toolbox: Arc::new(toolbox),
            model: "gpt-4o-mini".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

/// A fake Streamable HTTP MCP server with one tool, `probe`, that records the `_meta`
/// of each `tools/call`.
async fn mcp_server() -> (String, Arc<Mutex<Vec<Value>>>, tokio::task::JoinHandle<()>) {
    let metas: Arc<Mutex<Vec<Value>>> = Arc::default();
    let kept = Arc::clone(&metas);
    let app = axum::Router::new().route(
        "/mcp",
        post(move |Json(body): Json<Value>| {
            let kept = Arc::clone(&kept);
            async move {
                let Some(id) = body.get("id").cloned() else {
                    return StatusCode::ACCEPTED.into_response();
                };
                let result = match body["method"].as_str().unwrap_or_default() {
                    "initialize" => {
                        json!({"protocolVersion": "2025-03-26", "capabilities": {"tools": {}},
                               "serverInfo": {"name": "remote", "version": "1.0"}})
                    }
                    "tools/list" => json!({"tools": [{"name": "probe", "description": "Probes.",
                        "inputSchema": {"type": "object", "properties": {}}}]}),
                    "tools/call" => {
                        kept.lock().unwrap().push(body["params"]["_meta"].clone());
                        json!({"content": [{"type": "text", "text": "probed"}], "isError": false})
                    }
                    _ => {
                        return Json(json!({"jsonrpc": "2.0", "id": id,
                            "error": {"code": -32601, "message": "no such method"}}))
                        .into_response();
                    }
                };
                Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
            }
        })
        .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
        .delete(|| async { StatusCode::METHOD_NOT_ALLOWED }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, metas, task)
}

/// Telemetry started from `config`, and a server over the `model` server that traces
/// every turn with it (`tweak` sets more).
fn traced(
    config: TelemetryConfig,
    model: &MockServer,
    tweak: impl FnOnce(&mut ServerSettings),
) -> (Arc<Telemetry>, AppState) {
    let telemetry = Arc::new(Telemetry::start(&config).unwrap());
    let mut settings = ServerSettings {
        telemetry: Some(Arc::clone(&telemetry)),
        ..ServerSettings::default()
    };
    tweak(&mut settings);
    let state = AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Modelled {
            base_url: model.url(),
        }),
        PolicyConfig::default(),
        settings,
    );
    (telemetry, state)
}

/// `uri` with `body` and the caller's `traceparent`.
pub(super) fn traced_post(uri: &str, body: Value, traceparent: &str) -> Request<Body> {
    Request::post(uri)
        .header("content-type", "application/json")
        .header("traceparent", traceparent)
        .header("tracestate", "buddy-test=1")
        .body(Body::from(body.to_string()))
        .unwrap()
}

pub(super) fn caller(trace: &str) -> String {
    format!("00-{trace}-00f067aa0ba902b7-01")
}

/// The spans of one trace, once the turn's spans have all arrived.
pub(super) async fn spans_of(telemetry: &Telemetry, receiver: &Receiver, trace: &str) -> Vec<Got> {
    telemetry.flush().await;
    receiver
        .spans
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.trace() == trace)
        .cloned()
        .collect()
}

pub(super) fn named<'a>(spans: &'a [Got], prefix: &str) -> Vec<&'a Got> {
    spans
        .iter()
        .filter(|s| s.span.name.starts_with(prefix))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turns_spans_reach_an_otlp_receiver_in_the_callers_trace() {
    let receiver = receiver().await;
    let model = model_server().await;
    let (mcp_url, metas, mcp_task) = mcp_server().await;
    let (telemetry, state) = traced(
        TelemetryConfig {
            endpoint: Some(format!("{}/v1/traces", receiver.url)),
            service_name: Some("buddy-test".into()),
            ..TelemetryConfig::default()
        },
        &model,
        |settings| settings.allow_request_mcp = true,
    );
    let t = Traced {
        telemetry,
        state,
        receiver,
        model,
    };
    one_round_of_two_tools(&t).await;
    a_loop_ends_with_its_reason(&t).await;
    a_client_tool_round_trip_is_one_trace(&t).await;
    an_mcp_call_carries_its_span_in_meta(&t, &mcp_url, &metas).await;
    mcp_task.abort();
    without_a_traceparent_a_turn_is_a_root(&t).await;
}

/// What the parts of the trace test share: the server, its telemetry, the OTLP receiver
/// and the model server.
struct Traced {
    telemetry: Arc<Telemetry>,
    state: AppState,
    receiver: Receiver,
    model: MockServer,
}

/// Part 1 of the trace test.
async fn one_round_of_two_tools(t: &Traced) {
    // 1. Two tools in one round, then the answer: one invoke_agent, two chats, two
    //    execute_tools, all in the caller's trace under the caller's span.
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let (status, body) = send(
        &t.state,
        traced_post(
            "/v1/chat",
            json!({"message": "look up two invoices"}),
            &caller(trace),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let spans = spans_of(&t.telemetry, &t.receiver, trace).await;
    let agents = named(&spans, "invoke_agent");
    assert_eq!(agents.len(), 1, "{spans:#?}");
    let agent = agents[0];
    assert_eq!(agent.span.name, "invoke_agent buddy");
    assert_eq!(
        agent.parent(),
        "00f067aa0ba902b7",
        "the caller's span is the parent"
    );
    assert_eq!(agent.scope, "buddy");
    assert_eq!(agent.schema_url, buddy_telemetry::semconv::SCHEMA_URL);
    assert_eq!(agent.service.as_deref(), Some("buddy-test"));
    assert_eq!(
        agent.text("gen_ai.operation.name").as_deref(),
        Some("invoke_agent")
    );
    assert_eq!(agent.text("gen_ai.agent.name").as_deref(), Some("buddy"));
    assert_eq!(
        agent.text("gen_ai.provider.name").as_deref(),
        Some("openai")
    );
    assert_eq!(
        agent.text("gen_ai.request.model").as_deref(),
        Some("gpt-4o-mini")
    );
    assert!(
        agent
            .text("gen_ai.conversation.id")
            .is_some_and(|c| c.starts_with("conv"))
    );
    assert_eq!(
        agent.text("buddy.stop_reason").as_deref(),
        Some("completed")
    );
    assert_eq!(agent.text("error.type"), None);
    assert_eq!(agent.int("buddy.model_calls"), Some(2));
    assert_eq!(agent.int("buddy.tool_calls"), Some(2));
    assert_eq!(agent.int("gen_ai.usage.input_tokens"), Some(40));
    assert_eq!(agent.int("gen_ai.usage.output_tokens"), Some(20));
    // gpt-4o-mini's list price: the turn has a cost.
    assert!(matches!(agent.attr("buddy.cost_usd"), Some(Any::DoubleValue(c)) if c > 0.0));
    its_chats_and_tools(t, &spans, agent);
}

/// Part 1 of the trace test, continued: the round's chat and execute_tool spans.
fn its_chats_and_tools(t: &Traced, spans: &[Got], agent: &Got) {
    let chats = named(spans, "chat ");
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for chat in &chats {
        assert_eq!(chat.span.name, "chat gpt-4o-mini");
        assert_eq!(chat.parent(), agent.id());
        assert_eq!(chat.span.kind, 3, "SPAN_KIND_CLIENT");
        assert_eq!(chat.text("gen_ai.operation.name").as_deref(), Some("chat"));
        assert_eq!(chat.int("gen_ai.usage.input_tokens"), Some(20));
        assert_eq!(chat.int("gen_ai.usage.output_tokens"), Some(10));
        // No content unless the operator opts in.
        assert_eq!(chat.text("gen_ai.input.messages"), None);
    }
    let mut finishes: Vec<Vec<String>> = chats
        .iter()
        .map(|c| c.texts("gen_ai.response.finish_reasons"))
        .collect();
    finishes.sort();
    assert_eq!(
        finishes,
        vec![vec!["stop".to_owned()], vec!["tool_call".to_owned()]]
    );
    // Each model request carried its chat span's context to the model server.
    let sent: Vec<String> = t
        .model
        .requests()
        .iter()
        .filter_map(|r| r.header("traceparent").map(str::to_owned))
        .collect();
    for chat in &chats {
        assert!(sent.contains(&chat.traceparent()), "{sent:?}");
        // The provider as the conventions name it, and the server it was reached at.
        assert_eq!(chat.text("gen_ai.provider.name").as_deref(), Some("openai"));
        assert_eq!(chat.text("server.address").as_deref(), Some("127.0.0.1"));
    }
    // The caller's tracestate went on with the trace.
    for request in t.model.requests() {
        assert_eq!(request.header("tracestate"), Some("buddy-test=1"));
    }

    let tools = named(spans, "execute_tool");
    assert_eq!(tools.len(), 2, "{spans:#?}");
    let mut ids: Vec<String> = tools
        .iter()
        .map(|t| {
            assert_eq!(t.span.name, "execute_tool lookup");
            assert_eq!(t.parent(), agent.id());
            assert_eq!(t.text("gen_ai.tool.name").as_deref(), Some("lookup"));
            assert_eq!(t.text("gen_ai.tool.type").as_deref(), Some("function"));
            assert_eq!(t.text("error.type"), None);
            t.text("gen_ai.tool.call.id").unwrap()
        })
        .collect();
    ids.sort();
    assert_eq!(ids, ["call_a", "call_b"]);
}

/// Part 2 of the trace test.
async fn a_loop_ends_with_its_reason(t: &Traced) {
    // 2. A loop: the turn ends with its stop reason as error.type and the guard trips as
    //    events on the turn's span.
    let trace = "5cf92f3577b34da6a3ce929d0e0e4737";
    let (status, body) = send(
        &t.state,
        traced_post(
            "/v1/chat",
            json!({"message": "keep looking"}),
            &caller(trace),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let spans = spans_of(&t.telemetry, &t.receiver, trace).await;
    let agent = named(&spans, "invoke_agent")[0];
    let reason = agent.text("buddy.stop_reason").unwrap();
    assert_ne!(reason, "completed", "{body}");
    assert_eq!(agent.text("error.type"), Some(reason.clone()));
    assert!(body.contains(&format!("\"reason\":\"{reason}\"")), "{body}");
    let guards: Vec<String> = agent
        .span
        .events
        .iter()
        .filter(|e| e.name == "buddy.guard_tripped")
        .filter_map(|e| {
            e.attributes
                .iter()
                .find(|kv| kv.key == "buddy.guard")
                .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                    Any::StringValue(s) => Some(s.clone()),
                    _ => None,
                })
        })
        .collect();
    assert!(!guards.is_empty(), "{:#?}", agent.span.events);
    let chats = named(&spans, "chat ");
    assert!(
        chats
            .iter()
            .any(|c| c.text("buddy.call.purpose").as_deref() == Some("finalize")),
        "the answer call after the guard is its own chat span"
    );
    assert!(named(&spans, "execute_tool").len() >= 2);
}

/// Part 3 of the trace test.
async fn a_client_tool_round_trip_is_one_trace(t: &Traced) {
    // 3. A client-tool round trip on the OpenAI endpoint: two requests, two turns, one
    //    trace; the first ends waiting for the client's tool, its call span with it.
    let trace = "6df92f3577b34da6a3ce929d0e0e4738";
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let mut messages = vec![json!({"role": "user", "content": "what is the weather"})];
    let (status, body) = send(
        &t.state,
        traced_post(
            "/v1/chat/completions",
            json!({"model": "gpt-4o-mini", "messages": messages, "tools": tools}),
            &caller(trace),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let reply: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        reply["choices"][0]["finish_reason"], "tool_calls",
        "{reply}"
    );
    messages.push(reply["choices"][0]["message"].clone());
    messages.push(json!({"role": "tool", "tool_call_id": "call_w", "content": "sunny"}));
    let (status, body) = send(
        &t.state,
        traced_post(
            "/v1/chat/completions",
            json!({"model": "gpt-4o-mini", "messages": messages, "tools": tools}),
            &caller(trace),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let spans = spans_of(&t.telemetry, &t.receiver, trace).await;
    let mut reasons: Vec<String> = named(&spans, "invoke_agent")
        .iter()
        .map(|a| {
            assert_eq!(a.parent(), "00f067aa0ba902b7");
            assert_eq!(a.text("error.type"), None, "a pause is not an error");
            a.text("buddy.stop_reason").unwrap()
        })
        .collect();
    reasons.sort();
    assert_eq!(reasons, ["client_tool_calls", "completed"]);
    let weather = named(&spans, "execute_tool get_weather");
    assert_eq!(weather.len(), 1, "{spans:#?}");
    assert_eq!(
        weather[0].text("gen_ai.tool.call.id").as_deref(),
        Some("call_w")
    );
    assert_eq!(
        weather[0].text("buddy.stop_reason").as_deref(),
        Some("client_tool_calls"),
        "ended with the turn that handed it to the client"
    );
    assert_eq!(named(&spans, "chat ").len(), 2);
}

/// Part 4 of the trace test.
async fn an_mcp_call_carries_its_span_in_meta(
    t: &Traced,
    mcp_url: &str,
    metas: &Mutex<Vec<Value>>,
) {
    // 4. An MCP call: the execute_tool span's context travels in `params._meta`.
    let trace = "7ef92f3577b34da6a3ce929d0e0e4739";
    let (status, body) = send(
        &t.state,
        traced_post(
            "/v1/chat",
            json!({"message": "probe it", "mcp": [{"name": "remote", "url": mcp_url}]}),
            &caller(trace),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let spans = spans_of(&t.telemetry, &t.receiver, trace).await;
    let probe = named(&spans, "execute_tool remote__probe");
    assert_eq!(probe.len(), 1, "{spans:#?}");
    let metas = metas.lock().unwrap().clone();
    assert_eq!(metas.len(), 1, "{metas:?}");
    assert_eq!(
        metas[0]["traceparent"].as_str(),
        Some(probe[0].traceparent().as_str()),
        "{metas:?}"
    );
}

/// Part 5 of the trace test.
async fn without_a_traceparent_a_turn_is_a_root(t: &Traced) {
    // Without a traceparent a turn starts a trace of its own.
    let before = t.receiver.spans.lock().unwrap().len();
    let (status, _) = send(
        &t.state,
        super::post("/v1/chat", json!({"message": "look up two invoices"}), None),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    t.telemetry.flush().await;
    let spans = t.receiver.spans.lock().unwrap().clone();
    let fresh: Vec<&Got> = spans[before..]
        .iter()
        .filter(|s| s.span.name.starts_with("invoke_agent"))
        .collect();
    assert_eq!(fresh.len(), 1);
    assert!(fresh[0].span.parent_span_id.is_empty(), "a root span");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_goes_on_the_spans_only_when_the_operator_opts_in() {
    let receiver = receiver().await;
    let model = model_server().await;
    let (telemetry, state) = traced(
        TelemetryConfig {
            endpoint: Some(format!("{}/v1/traces", receiver.url)),
            capture_content: true,
            ..TelemetryConfig::default()
        },
        &model,
        |_| {},
    );
    let trace = "8ff92f3577b34da6a3ce929d0e0e473a";
    let (status, _) = send(
        &state,
        traced_post(
            "/v1/chat",
            json!({"message": "look up two invoices"}),
            &caller(trace),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let spans = spans_of(&telemetry, &receiver, trace).await;
    let first = named(&spans, "chat ")
        .into_iter()
        .find(|c| c.texts("gen_ai.response.finish_reasons") == ["tool_call"])
        .unwrap()
        .clone();
    let input: Value = serde_json::from_str(&first.text("gen_ai.input.messages").unwrap()).unwrap();
    assert_eq!(
        input.as_array().and_then(|m| m.last()).cloned(),
        Some(
            json!({"role": "user", "parts": [{"type": "text", "content": "look up two invoices"}]})
        )
    );
    let output: Value =
        serde_json::from_str(&first.text("gen_ai.output.messages").unwrap()).unwrap();
    assert_eq!(output[0]["parts"][1]["type"], "tool_call");
    assert_eq!(
        output[0]["parts"][1]["arguments"],
        json!({"invoice": "A-1"})
    );
    assert_eq!(output[0]["finish_reason"], "tool_call");
    let tool = named(&spans, "execute_tool")[0].clone();
    assert!(tool.text("gen_ai.tool.call.arguments").is_some());
    assert!(
        tool.text("gen_ai.tool.call.result")
            .unwrap()
            .contains("is paid")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_costs_the_turns_nothing() {
    let model = model_server().await;
    // A port that was free a moment ago: every export is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (telemetry, state) = traced(
        TelemetryConfig {
            endpoint: Some(format!("http://127.0.0.1:{port}")),
            timeout_secs: Some(2.0),
            ..TelemetryConfig::default()
        },
        &model,
        |_| {},
    );
    for _ in 0..3 {
        let (status, body) = send(
            &state,
            traced_post(
                "/v1/chat",
                json!({"message": "look up two invoices"}),
                &caller("9af92f3577b34da6a3ce929d0e0e473b"),
            ),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body.contains("\"reason\":\"completed\""), "{body}");
    }
    tokio::time::timeout(std::time::Duration::from_secs(60), telemetry.shutdown())
        .await
        .expect("shutting telemetry down ends even when nothing can be sent");
}
