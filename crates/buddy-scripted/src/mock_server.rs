//! `buddy mock-server`: an OpenAI-compatible server (streaming and not) that plays the
//! scripted scenarios. The request's `model` picks the scenario (`scripted:NAME` or
//! `NAME`); the reply is decided from the conversation it receives alone, so any client
//! or agent framework can be pointed at it. Every request is logged as one JSON line,
//! so a run's model calls can be counted from outside.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use buddy_core::{Completion, CompletionRequest, FinishReason, Provider, ToolChoice, ToolSpec};
use buddy_openai_wire::completion::{
    AssistantMessage, ChatCompletion, ChatUsage, Choice, Chunk, Delta, OutputToolCall,
};
use buddy_openai_wire::{ChatCompletionRequest, to_messages};

use crate::provider::ScriptedProvider;
use crate::scenario::Scenario;
use futures::StreamExt;
use serde_json::{Value, json};

/// A request log kept in memory, for reading back what a mock server saw.
#[derive(Clone, Default)]
pub struct MemoryLog(Arc<Mutex<Vec<u8>>>);

impl MemoryLog {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        self.0
            .lock()
            .map(|l| String::from_utf8_lossy(&l).into_owned())
            .unwrap_or_default()
    }
}

impl Write for MemoryLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut log) = self.0.lock() {
            log.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Concurrent calls one HTTP/2 connection may carry (hyper's default is 200).
const MAX_STREAMS: u32 = 100_000;

/// A mock server's scenarios, latency and request log.
pub struct MockServer {
    scenarios: BTreeMap<String, Arc<ScriptedProvider>>,
    latency: Duration,
    log: Option<Mutex<Box<dyn Write + Send>>>,
}

impl MockServer {
    /// Serves `scenarios`, answering each request after `latency`, logging to `log`.
    pub fn new(
        scenarios: Vec<Scenario>,
        latency: Duration,
        log: Option<Box<dyn Write + Send>>,
    ) -> Self {
        MockServer {
            scenarios: scenarios
                .into_iter()
                .map(|s| (s.name.clone(), Arc::new(ScriptedProvider::new(Arc::new(s)))))
                .collect(),
            latency,
            log: log.map(Mutex::new),
        }
    }

    /// The router: `POST /v1/chat/completions`, `GET /v1/models`.
    pub fn router(self) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(completions))
            .route("/v1/models", get(models))
            // A model server takes long conversations: room for large tool arguments.
            .layer(axum::extract::DefaultBodyLimit::max(256 * 1024 * 1024))
            .with_state(Arc::new(self))
    }

    /// Serves the router on `listener` until `shutdown`, speaking HTTP/1.1 and HTTP/2
    /// (also without TLS), with room for `MAX_STREAMS` concurrent calls on one HTTP/2
    /// connection: a load test's thousands of waiting calls share a few connections.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> std::io::Result<()> {
        let router = self.router();
        tokio::pin!(shutdown);
        loop {
            let (stream, _) = tokio::select! {
                accepted = listener.accept() => accepted?,
                () = &mut shutdown => return Ok(()),
            };
            // Streamed chunks go out at once, not after the client's delayed ACK.
            let _ = stream.set_nodelay(true);
            let service = hyper_util::service::TowerToHyperService::new(router.clone());
            tokio::spawn(async move {
                let mut builder = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                );
                builder.http2().max_concurrent_streams(MAX_STREAMS);
                let _ = builder
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    }

    /// Logs one request: when, its model, stream flag and sizes, then `outcome`'s fields.
    fn log_request(
        &self,
        model: &str,
        stream: bool,
        messages: usize,
        tools: usize,
        outcome: Value,
    ) {
        if self.log.is_none() {
            return;
        }
        let mut line = json!({
            "ts_ms": SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0),
            "model": model,
            "stream": stream,
            "messages": messages,
            "tools": tools,
        });
        if let (Some(line), Value::Object(outcome)) = (line.as_object_mut(), outcome) {
            line.extend(outcome);
        }
        self.log(line);
    }

    fn log(&self, line: Value) {
        if let Some(log) = &self.log
            && let Ok(mut out) = log.lock()
        {
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}

fn error(status: StatusCode, message: String) -> Response {
    (
        status,
        Json(json!({"error": {"message": message, "type": "invalid_request_error"}})),
    )
        .into_response()
}

async fn models(State(server): State<Arc<MockServer>>) -> Json<Value> {
    let data: Vec<Value> = server
        .scenarios
        .keys()
        .map(|n| json!({"id": format!("scripted:{n}"), "object": "model", "created": 0, "owned_by": "buddy-mock"}))
        .collect();
    Json(json!({"object": "list", "data": data}))
}

async fn completions(State(server): State<Arc<MockServer>>, body: axum::body::Bytes) -> Response {
    let body: ChatCompletionRequest = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("not a chat completion request: {e}"),
            );
        }
    };
    let model = body.model.clone().unwrap_or_default();
    let name = model.strip_prefix("scripted:").unwrap_or(&model).to_owned();
    let Some(provider) = server.scenarios.get(&name).cloned() else {
        return error(
            StatusCode::NOT_FOUND,
            format!("no scenario named `{name}`; GET /v1/models lists them"),
        );
    };
    let messages = match to_messages(body.messages) {
        Ok(messages) => messages,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let tools: Vec<ToolSpec> = body.tools.into_iter().map(ToolSpec::from).collect();
    let tool_choice = match body.tool_choice.as_ref().and_then(Value::as_str) {
        Some("none") => Some(ToolChoice::None),
        Some("required") => Some(ToolChoice::Required),
        Some("auto") => Some(ToolChoice::Auto),
        _ => None,
    };
    if !server.latency.is_zero() {
        tokio::time::sleep(server.latency).await;
    }
    let mut request = CompletionRequest::new(&model, &messages);
    if !tools.is_empty() {
        request = request.with_tools(&tools);
    }
    request.tool_choice = tool_choice;
    let reply = match provider.complete(request).await {
        Ok(reply) => reply,
        // A scenario's own refusal goes out as the model server would send it (and is
        // logged: it was a request the model server saw).
        Err(buddy_core::ProviderError::Http {
            status, message, ..
        }) => {
            let seen = json!({"refused": status});
            server.log_request(&model, body.stream, messages.len(), tools.len(), seen);
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
            return error(status, message);
        }
        Err(e) => return error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
    };
    let seen = json!({
        "reply_text_chars": reply.text.chars().count(),
        "reply_tool_calls": reply.tool_calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
    });
    server.log_request(&model, body.stream, messages.len(), tools.len(), seen);
    if body.stream {
        streamed(&model, reply, provider.scenario().wire_chunk_chars)
    } else {
        whole(&model, reply)
    }
}

fn finish_wire(reason: Option<&FinishReason>) -> &'static str {
    match reason {
        Some(FinishReason::ToolCalls) => "tool_calls",
        Some(FinishReason::Length) => "length",
        Some(FinishReason::ContentFilter) => "content_filter",
        _ => "stop",
    }
}

fn usage(reply: &Completion) -> ChatUsage {
    let u = reply.usage.unwrap_or_default();
    ChatUsage::new(u.input_tokens, u.output_tokens)
}

fn whole(model: &str, reply: Completion) -> Response {
    let finish = finish_wire(reply.finish.as_ref());
    let usage = usage(&reply);
    let calls = reply
        .tool_calls
        .into_iter()
        .map(|c| OutputToolCall::whole(None, &c.id, &c.name, c.arguments))
        .collect();
    let choice = Choice::new(AssistantMessage::new(reply.text, calls), finish);
    Json(ChatCompletion::new(
        "chatcmpl-mock",
        0,
        model,
        choice,
        usage,
    ))
    .into_response()
}

/// Largest piece of a call's arguments in one streamed chunk.
const ARGUMENT_PIECE_BYTES: usize = 64 * 1024;

/// `text` in pieces of at most `max` bytes, cut at character boundaries; one piece
/// (perhaps empty) when it is short.
fn pieces(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (piece, tail) = rest.split_at(cut);
        out.push(piece);
        rest = tail;
    }
    out.push(rest);
    out
}

/// `text` in pieces of at most `chars` characters; one piece (perhaps empty) when short.
fn char_pieces(text: &str, chars: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let cut = rest
            .char_indices()
            .nth(chars)
            .map_or(rest.len(), |(i, _)| i);
        let (piece, tail) = rest.split_at(cut);
        out.push(piece);
        if tail.is_empty() {
            return out;
        }
        rest = tail;
    }
}

/// The reply as SSE; with `wire_chunk_chars`, in pieces of that many characters, each
/// event written on its own (see [`Scenario::wire_chunk_chars`]).
fn streamed(model: &str, reply: Completion, wire_chunk_chars: Option<usize>) -> Response {
    let chunk = |delta: Delta, finish: Option<&'static str>| {
        serde_json::to_string(&Chunk::new("chatcmpl-mock", 0, model, delta, finish))
    };
    let text_chars = wire_chunk_chars.unwrap_or(16).max(1);
    let mut chunks = vec![chunk(Delta::opening(), None)];
    for piece in char_pieces(&reply.text, text_chars) {
        if !piece.is_empty() {
            chunks.push(chunk(Delta::text(piece.to_owned()), None));
        }
    }
    for (i, call) in reply.tool_calls.iter().enumerate() {
        let opening = OutputToolCall::whole(Some(i), &call.id, &call.name, "".into());
        chunks.push(chunk(Delta::calls(vec![opening]), None));
        // Long arguments come in pieces, as a real server streams them.
        let arguments = match wire_chunk_chars {
            Some(chars) => char_pieces(&call.arguments, chars.max(1)),
            None => pieces(&call.arguments, ARGUMENT_PIECE_BYTES),
        };
        for piece in arguments {
            chunks.push(chunk(
                Delta::calls(vec![OutputToolCall::piece(i, piece)]),
                None,
            ));
        }
    }
    chunks.push(chunk(
        Delta::default(),
        Some(finish_wire(reply.finish.as_ref())),
    ));
    chunks.push(serde_json::to_string(&Chunk::usage(
        "chatcmpl-mock",
        0,
        model,
        usage(&reply),
    )));
    let chunks = match chunks.into_iter().collect::<Result<Vec<String>, _>>() {
        Ok(chunks) => chunks,
        Err(e) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the reply could not be written: {e}"),
            );
        }
    };
    let mut events: Vec<Event> = chunks.iter().map(|c| Event::default().data(c)).collect();
    events.push(Event::default().data("[DONE]"));
    let events = futures::stream::iter(events.into_iter().map(Ok::<_, Infallible>));
    if wire_chunk_chars.is_none() {
        return Sse::new(events).into_response();
    }
    // Yielding before each event leaves the body pending, so hyper writes what it holds:
    // one event per write, as a server generating tokens sends them.
    Sse::new(events.then(|event| async move {
        tokio::task::yield_now().await;
        event
    }))
    .into_response()
}
