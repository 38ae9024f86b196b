//! One turn's spans, built from what the engine tells its observer: `invoke_agent` for the
//! turn, a `chat` child per model call, an `execute_tool` child per tool call, guard trips
//! as events on the turn's span; a sub-agent's turn is an `invoke_agent` span of its own
//! under the tool call that started it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use buddy_core::{
    ChatEvent, CompletionRequest, FinishReason, Message, ModelCallEnd, ResponseInfo, ServedBy,
    StopReason, ToolCall, TraceContext, TurnObserver, TurnStats,
};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::SdkTracer;
use serde_json::json;

use crate::propagate::{extract, headers, inject};
use crate::semconv as sc;

/// Who a turn's spans describe.
#[derive(Clone, Copy, Debug, Default)]
pub struct TurnScope<'a> {
    /// The caller's W3C `traceparent` (an HTTP header): the turn's span becomes its child.
    pub traceparent: Option<&'a str>,
    /// The caller's W3C `tracestate`, kept with the parent.
    pub tracestate: Option<&'a str>,
    /// The configured provider's name: `gen_ai.provider.name` when the provider does not
    /// say who serves it (see [`crate::Telemetry::turn_served`]).
    pub provider: &'a str,
    /// The model the turn asks for.
    pub model: &'a str,
    /// The stored conversation the turn belongs to.
    pub conversation: Option<&'a str>,
}

/// The name buddy's agent spans carry (`gen_ai.agent.name`).
const AGENT: &str = "buddy";

/// The open spans of one turn.
pub(crate) struct TurnSpans {
    tracer: SdkTracer,
    capture_content: bool,
    /// `gen_ai.provider.name`.
    provider: String,
    /// `server.address` and `server.port` of the model server, when known.
    server: Option<(String, Option<u16>)>,
    /// `gen_ai.conversation.id`, also on the spans of the turn's sub-agents.
    conversation: Option<String>,
    /// The context holding the turn's `invoke_agent` span: every other span's parent.
    turn: Context,
    open: Mutex<Open>,
}

/// What a turn's spans share with its sub-agents' (who serves them, what they record).
struct Agent {
    tracer: SdkTracer,
    capture_content: bool,
    provider: String,
    server: Option<(String, Option<u16>)>,
    conversation: Option<String>,
}

#[derive(Default)]
struct Open {
    chat: Option<Context>,
    tools: HashMap<String, Context>,
    ended: bool,
}

impl TurnSpans {
    pub(crate) fn start(
        tracer: SdkTracer,
        capture_content: bool,
        scope: TurnScope<'_>,
        served: Option<ServedBy<'_>>,
    ) -> Self {
        let parent = extract(scope.traceparent, scope.tracestate);
        let provider = served.map_or(scope.provider, |s| s.provider_name);
        let server = served.and_then(|s| server_of(s.base_url));
        TurnSpans::open_turn(
            Agent {
                tracer,
                capture_content,
                provider: provider.to_owned(),
                server,
                conversation: scope.conversation.map(str::to_owned),
            },
            &parent,
            AGENT,
            Some(scope.model),
        )
    }

    /// The spans of a turn run by `agent` under `parent`: its `invoke_agent` span opened.
    fn open_turn(agent: Agent, parent: &Context, name: &str, model: Option<&str>) -> Self {
        let Agent {
            tracer,
            capture_content,
            provider,
            server,
            conversation,
        } = agent;
        let mut attributes = vec![
            KeyValue::new(sc::OPERATION_NAME, "invoke_agent"),
            KeyValue::new(sc::AGENT_NAME, name.to_owned()),
            KeyValue::new(sc::PROVIDER_NAME, provider.clone()),
        ];
        if let Some(model) = model {
            attributes.push(KeyValue::new(sc::REQUEST_MODEL, model.to_owned()));
        }
        if let Some(id) = &conversation {
            attributes.push(KeyValue::new(sc::CONVERSATION_ID, id.clone()));
        }
        let span = tracer
            .span_builder(format!("invoke_agent {name}"))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes)
            .start_with_context(&tracer, parent);
        TurnSpans {
            turn: parent.with_span(span),
            tracer,
            capture_content,
            provider,
            server,
            conversation,
            open: Mutex::default(),
        }
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn start_tool(&self, id: &str, name: &str, arguments: &str) {
        let mut attributes = vec![
            KeyValue::new(sc::OPERATION_NAME, "execute_tool"),
            KeyValue::new(sc::TOOL_NAME, name.to_owned()),
            KeyValue::new(sc::TOOL_CALL_ID, id.to_owned()),
            KeyValue::new(sc::TOOL_TYPE, "function"),
        ];
        if self.capture_content {
            attributes.push(KeyValue::new(sc::TOOL_CALL_ARGUMENTS, arguments.to_owned()));
        }
        let span = self
            .tracer
            .span_builder(format!("execute_tool {name}"))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &self.turn);
        let mut open = self.open();
        if !open.ended {
            open.tools.insert(id.to_owned(), self.turn.with_span(span));
        }
    }

    fn end_tool(&self, id: &str, content: &str, is_error: bool) {
        let Some(cx) = self.open().tools.remove(id) else {
            return;
        };
        let span = cx.span();
        if self.capture_content {
            span.set_attribute(KeyValue::new(sc::TOOL_CALL_RESULT, content.to_owned()));
        }
        if is_error {
            span.set_attribute(KeyValue::new(sc::ERROR_TYPE, "tool_error"));
            span.set_status(Status::error(first_line(content)));
        }
        span.end();
    }

    fn guard(&self, event: &ChatEvent) {
        let ChatEvent::GuardTripped {
            guard,
            action,
            skill,
            detail,
            ..
        } = event
        else {
            return;
        };
        let mut attributes = vec![
            KeyValue::new(sc::GUARD, guard.as_str()),
            KeyValue::new(sc::GUARD_ACTION, action.as_str()),
            KeyValue::new(sc::GUARD_DETAIL, detail.clone()),
        ];
        if let Some(skill) = skill {
            attributes.push(KeyValue::new(sc::GUARD_SKILL, skill.clone()));
        }
        self.turn.span().add_event(sc::GUARD_EVENT, attributes);
    }

    fn end_turn(&self, reason: StopReason, stats: &TurnStats, message: Option<&str>) {
        let (chat, tools) = {
            let mut open = self.open();
            if open.ended {
                return;
            }
            open.ended = true;
            (open.chat.take(), std::mem::take(&mut open.tools))
        };
        // Calls still open end with the turn: they were cut off, or (client tools, a
        // pause for approval) run elsewhere after it.
        for cx in chat.into_iter().chain(tools.into_values()) {
            let span = cx.span();
            if !reason.is_clean() {
                span.set_attribute(KeyValue::new(sc::ERROR_TYPE, reason.as_str()));
            }
            span.set_attribute(KeyValue::new(sc::STOP_REASON, reason.as_str()));
            span.end();
        }
        let span = self.turn.span();
        span.set_attribute(KeyValue::new(sc::STOP_REASON, reason.as_str()));
        span.set_attribute(KeyValue::new(sc::MODEL_CALLS, i64::from(stats.model_calls)));
        span.set_attribute(KeyValue::new(sc::TOOL_CALLS, i64::from(stats.tool_calls)));
        // What its sub-agents made, at every depth (already in the counts above).
        if !stats.delegated.is_empty() {
            let delegated = &stats.delegated;
            span.set_attribute(KeyValue::new(
                sc::DELEGATED_AGENTS,
                i64::from(delegated.agents),
            ));
            span.set_attribute(KeyValue::new(
                sc::DELEGATED_MODEL_CALLS,
                i64::from(delegated.model_calls),
            ));
            span.set_attribute(KeyValue::new(
                sc::DELEGATED_TOOL_CALLS,
                i64::from(delegated.tool_calls),
            ));
        }
        span.set_attribute(KeyValue::new(
            sc::USAGE_INPUT_TOKENS,
            count(stats.input_tokens),
        ));
        span.set_attribute(KeyValue::new(
            sc::USAGE_OUTPUT_TOKENS,
            count(stats.output_tokens),
        ));
        set_cache_usage(&span, stats.cache_read_tokens, stats.cache_write_tokens);
        if let Some(cost) = stats.cost_usd {
            span.set_attribute(KeyValue::new(sc::COST_USD, cost.dollars()));
        }
        if !reason.is_clean() {
            span.set_attribute(KeyValue::new(sc::ERROR_TYPE, reason.as_str()));
        }
        if let Some(message) = message {
            span.set_status(Status::error(first_line(message)));
        }
        span.end();
    }
}

impl TurnObserver for TurnSpans {
    fn model_call_started(&self, request: &CompletionRequest<'_>) -> Option<TraceContext> {
        let tools = request.callable_tools().len();
        let mut attributes = vec![
            KeyValue::new(sc::OPERATION_NAME, "chat"),
            KeyValue::new(sc::PROVIDER_NAME, self.provider.clone()),
            KeyValue::new(sc::REQUEST_MODEL, request.model.to_owned()),
            KeyValue::new(sc::CALL_PURPOSE, purpose(request)),
            KeyValue::new(sc::TOOLS_OFFERED, count(tools as u64)),
        ];
        if let Some(max) = request.max_output_tokens {
            attributes.push(KeyValue::new(sc::REQUEST_MAX_TOKENS, i64::from(max)));
        }
        // The sampling settings as the provider sends them (one it cannot honour ends the
        // turn before any call).
        if let Some(sampling) = request.sampling {
            if let Some(t) = sampling.temperature {
                attributes.push(KeyValue::new(sc::REQUEST_TEMPERATURE, t));
            }
            if let Some(p) = sampling.top_p {
                attributes.push(KeyValue::new(sc::REQUEST_TOP_P, p));
            }
            if let Some(seed) = sampling.seed {
                attributes.push(KeyValue::new(sc::REQUEST_SEED, seed));
            }
        }
        if let Some((address, port)) = &self.server {
            attributes.push(KeyValue::new(sc::SERVER_ADDRESS, address.clone()));
            if let Some(port) = port {
                attributes.push(KeyValue::new(sc::SERVER_PORT, i64::from(*port)));
            }
        }
        if self.capture_content {
            attributes.push(KeyValue::new(
                sc::INPUT_MESSAGES,
                input_messages(request.messages),
            ));
        }
        let span = self
            .tracer
            .span_builder(format!("chat {}", request.model))
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &self.turn);
        let cx = self.turn.with_span(span);
        let trace = headers(&cx);
        let mut open = self.open();
        if open.ended {
            return None;
        }
        open.chat = Some(cx);
        trace
    }

    fn model_call_response(&self, response: &ResponseInfo) {
        let open = self.open();
        let Some(cx) = &open.chat else {
            return;
        };
        let span = cx.span();
        if let Some(id) = &response.id {
            span.set_attribute(KeyValue::new(sc::RESPONSE_ID, id.clone()));
        }
        if let Some(model) = &response.model {
            span.set_attribute(KeyValue::new(sc::RESPONSE_MODEL, model.clone()));
        }
    }

    fn model_call_ended(&self, end: &ModelCallEnd<'_>) {
        let Some(cx) = self.open().chat.take() else {
            return;
        };
        let span = cx.span();
        if let Some(finish) = end.finish {
            span.set_attribute(KeyValue::new(
                sc::RESPONSE_FINISH_REASONS,
                Value::Array(Array::String(vec![StringValue::from(finish_reason(
                    finish,
                ))])),
            ));
        }
        if let Some(usage) = end.usage {
            span.set_attribute(KeyValue::new(
                sc::USAGE_INPUT_TOKENS,
                count(usage.input_tokens),
            ));
            span.set_attribute(KeyValue::new(
                sc::USAGE_OUTPUT_TOKENS,
                count(usage.output_tokens),
            ));
            let parts = buddy_core::InputParts::of(&usage);
            set_cache_usage(&span, parts.read, parts.write_5m + parts.write_1h);
        }
        if let Some(cost) = end.cost {
            span.set_attribute(KeyValue::new(sc::COST_USD, cost.dollars()));
        }
        if self.capture_content && end.error.is_none() {
            span.set_attribute(KeyValue::new(
                sc::OUTPUT_MESSAGES,
                output_messages(end.text, end.tool_calls, end.finish),
            ));
        }
        if let Some(error) = end.error {
            span.set_attribute(KeyValue::new(sc::ERROR_TYPE, error));
            span.set_status(Status::error(
                end.message.as_deref().map_or(error.to_owned(), first_line),
            ));
        }
        span.end();
    }

    fn event(&self, event: &ChatEvent) {
        match event {
            ChatEvent::ToolCallStart {
                id,
                name,
                arguments,
            } => self.start_tool(id, name, arguments),
            ChatEvent::ToolCallResult {
                id,
                content,
                is_error,
                ..
            } => self.end_tool(id, content, *is_error),
            ChatEvent::GuardTripped { .. } => self.guard(event),
            ChatEvent::ApprovalRequired { calls } => {
                let names: Vec<StringValue> = calls
                    .iter()
                    .map(|c| StringValue::from(c.name.clone()))
                    .collect();
                self.turn.span().add_event(
                    sc::APPROVAL_EVENT,
                    vec![KeyValue::new(
                        sc::TOOL_NAME,
                        Value::Array(Array::String(names)),
                    )],
                );
            }
            ChatEvent::Done {
                reason,
                stats,
                answer,
            } => self.end_turn(*reason, stats, unanswered(*reason, answer)),
            ChatEvent::Error {
                reason,
                message,
                stats,
            } => self.end_turn(*reason, stats, Some(message)),
            _ => {}
        }
    }

    fn tool_traceparent(&self, call_id: &str) -> Option<String> {
        self.open().tools.get(call_id).and_then(inject)
    }

    /// The sub-agent's turn as an `invoke_agent` span under the tool call that started
    /// it (under the turn's span if that call's span is gone), in the same trace.
    fn sub_agent(&self, call_id: &str, agent: &str) -> Option<Arc<dyn TurnObserver>> {
        let parent = {
            let open = self.open();
            if open.ended {
                return None;
            }
            open.tools.get(call_id).cloned()
        }
        .unwrap_or_else(|| self.turn.clone());
        let shared = Agent {
            tracer: self.tracer.clone(),
            capture_content: self.capture_content,
            provider: self.provider.clone(),
            server: self.server.clone(),
            conversation: self.conversation.clone(),
        };
        let spans = TurnSpans::open_turn(shared, &parent, agent, None);
        spans
            .turn
            .span()
            .set_attribute(KeyValue::new(sc::TOOL_CALL_ID, call_id.to_owned()));
        Some(Arc::new(spans))
    }
}

impl Drop for TurnSpans {
    /// A turn dropped before its terminal event (its task was aborted) still ends its
    /// spans, so a trace never holds a span that never ends.
    fn drop(&mut self) {
        self.end_turn(
            StopReason::Cancelled,
            &TurnStats::default(),
            Some("the turn ended without a terminal event"),
        );
    }
}

/// Why a turn that ended with `done` has no answer of the model's, if it has none: the
/// model gave no answer (buddy's quotes the tool results), or the answer is empty at the
/// turn's end (a pause for approval or for client tools is no end). Such a turn's span
/// has status ERROR, as an `error` event's does.
fn unanswered(reason: StopReason, answer: &str) -> Option<&'static str> {
    match reason {
        StopReason::NoAnswer => {
            Some("the model gave no answer; buddy's answer quotes the tool results")
        }
        StopReason::ApprovalRequired | StopReason::ClientToolCalls => None,
        _ if answer.trim().is_empty() => Some("the turn ended without an answer"),
        _ => None,
    }
}

/// `server.address` and `server.port` of a base URL (the port even when it is the
/// scheme's default, as the conventions ask when it is known).
fn server_of(base_url: &str) -> Option<(String, Option<u16>)> {
    let url = reqwest::Url::parse(base_url).ok()?;
    let host = url
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']');
    Some((host.to_owned(), url.port_or_known_default()))
}

fn purpose(request: &CompletionRequest<'_>) -> &'static str {
    match request.purpose {
        buddy_core::CallPurpose::Turn => "turn",
        buddy_core::CallPurpose::Finalize => "finalize",
        buddy_core::CallPurpose::Reask => "reask",
    }
}

/// The GenAI conventions' finish reason names.
fn finish_reason(reason: &FinishReason) -> String {
    match reason {
        FinishReason::Stop => "stop".to_owned(),
        FinishReason::ToolCalls => "tool_call".to_owned(),
        FinishReason::Length => "length".to_owned(),
        FinishReason::ContentFilter => "content_filter".to_owned(),
        FinishReason::Other(other) => other.clone(),
    }
}

/// The prompt cache's share of a call's or a turn's input, when it had any.
fn set_cache_usage(span: &opentelemetry::trace::SpanRef<'_>, read: u64, written: u64) {
    if read > 0 {
        span.set_attribute(KeyValue::new(sc::USAGE_CACHE_READ_TOKENS, count(read)));
    }
    if written > 0 {
        span.set_attribute(KeyValue::new(
            sc::USAGE_CACHE_CREATION_TOKENS,
            count(written),
        ));
    }
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The first line of a message for a span's status, cut to 200 characters, with any URL
/// in it shown without credentials (a provider error names its `base_url`).
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    buddy_core::redact_urls_in(line).chars().take(200).collect()
}

/// Arguments as the conventions want them: the object, when they parse as one.
fn arguments(call: &ToolCall) -> serde_json::Value {
    serde_json::from_str(call.arguments.as_str())
        .unwrap_or_else(|_| serde_json::Value::String(call.arguments.to_string()))
}

/// `gen_ai.input.messages`: the request's messages in the conventions' JSON form.
fn input_messages(messages: &[Message]) -> String {
    let list: Vec<serde_json::Value> = messages
        .iter()
        .map(|m| match m {
            Message::System { content } => text_message("system", content),
            Message::User { content, .. } | Message::Note { content } => {
                text_message("user", content)
            }
            Message::Assistant {
                content,
                tool_calls,
            } => assistant_message(content.as_deref().unwrap_or_default(), tool_calls),
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => json!({"role": "tool", "parts": [
                {"type": "tool_call_response", "id": tool_call_id, "response": content}
            ]}),
        })
        .collect();
    serde_json::Value::Array(list).to_string()
}

/// `gen_ai.output.messages`: the reply in the conventions' JSON form.
fn output_messages(text: &str, calls: &[ToolCall], finish: Option<&FinishReason>) -> String {
    let mut message = assistant_message(text, calls);
    if let (Some(finish), Some(object)) = (finish, message.as_object_mut()) {
        object.insert("finish_reason".into(), finish_reason(finish).into());
    }
    serde_json::Value::Array(vec![message]).to_string()
}

fn text_message(role: &str, content: &str) -> serde_json::Value {
    json!({"role": role, "parts": [{"type": "text", "content": content}]})
}

fn assistant_message(text: &str, calls: &[ToolCall]) -> serde_json::Value {
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(json!({"type": "text", "content": text}));
    }
    for call in calls {
        parts.push(json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments(call)}));
    }
    json!({"role": "assistant", "parts": parts})
}
