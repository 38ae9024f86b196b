//! `POST /v1/chat/completions` and `GET /v1/models`, as OpenAI clients expect them.
//!
//! buddy runs its own skills server-side and answers with the final answer; tools the
//! client declares are handed back as ordinary `tool_calls` (the turn pauses there).
//! The stream satisfies the official SDK's strict `.stream()` helper: every chunk is a
//! `chat.completion.chunk` with integer `choices[].index`, tool-call pieces carry a
//! 0-based gap-free `index`, then `[DONE]`. Usage is streamed only when the request asks
//! (`stream_options.include_usage`), as OpenAI does: `"usage": null` on every chunk and
//! the figures in a last `choices: []` chunk — clients that read `choices[0]` of every
//! chunk would break on that chunk otherwise.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use buddy_core::{ChatEvent, Message, StopReason, ToolCall, ToolSpec};
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::client_tools::with_client_tools;
use crate::error::AppError;
use crate::request::{JsonBody, request_policy};
use crate::sse;
use crate::state::AppState;
use crate::turns::{CancelOnDrop, Conversation, Prelude, disconnect_guard, start_turn};
use buddy_openai_wire::completion::{
    AssistantMessage, ChatCompletion, ChatUsage, Choice, Chunk, Delta, OutputToolCall,
};
use buddy_openai_wire::{BuddyDetails, ChatCompletionRequest, to_messages};

/// Seconds since the Unix epoch (the `created` fields).
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `GET /v1/models`.
pub(crate) async fn models(State(state): State<AppState>) -> Json<Value> {
    let data: Vec<Value> = state
        .inner
        .backend
        .models()
        .into_iter()
        .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "buddy"}))
        .collect();
    Json(json!({"object": "list", "data": data}))
}

/// `POST /v1/chat/completions`.
pub(crate) async fn completions(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    JsonBody(mut body): JsonBody<ChatCompletionRequest>,
) -> Result<Response, AppError> {
    let sampling = body.sampling().map_err(AppError::BadRequest)?;
    let history = to_messages(std::mem::take(&mut body.messages)).map_err(AppError::BadRequest)?;
    if !history.iter().any(Message::is_user) {
        return Err(AppError::BadRequest(
            "`messages` has no user message".into(),
        ));
    }
    let policy = request_policy(body.buddy_policy.take())?;
    let mut resolved = state
        .inner
        .backend
        .resolve(None, body.model.as_deref())
        .map_err(|e| AppError::BadRequest(e.to_string()))?;
    let declared: Vec<ToolSpec> = body.tools.into_iter().map(ToolSpec::from).collect();
    resolved.toolbox =
        with_client_tools(resolved.toolbox, declared).map_err(AppError::BadRequest)?;
    let model = body.model.unwrap_or_else(|| resolved.model.clone());
    let turn = start_turn(
        &state,
        &caller,
        Conversation::Ephemeral(history),
        None,
        resolved,
        &policy,
        Prelude {
            openai: true,
            sampling,
            ..Prelude::default()
        },
    )
    .await?;
    let id = format!("chatcmpl-{}", turn.turn_id.trim_start_matches("turn_"));
    if body.stream {
        let include_usage = body.stream_options.is_some_and(|o| o.include_usage);
        return Ok(stream_response(&state, turn, id, model, include_usage));
    }
    let guard = CancelOnDrop(turn.cancel);
    let mut events = turn.events;
    let mut pending = Vec::new();
    let mut terminal = None;
    while let Some(event) = events.recv().await {
        track_pending(&mut pending, &event);
        if event.is_terminal() {
            terminal = Some(event);
        }
    }
    drop(guard);
    match terminal {
        Some(ChatEvent::Done {
            reason,
            answer,
            stats,
        }) => {
            let calls = if reason == StopReason::ClientToolCalls {
                pending
            } else {
                Vec::new()
            };
            let tool_calls = calls
                .into_iter()
                .map(|c| OutputToolCall::whole(None, &c.id, &c.name, c.arguments))
                .collect();
            let choice = Choice::new(
                AssistantMessage::new(answer, tool_calls),
                finish_reason(reason),
            );
            let usage = ChatUsage::new(stats.input_tokens, stats.output_tokens);
            let completion = ChatCompletion {
                buddy: Some(BuddyDetails::of(Some(reason), &stats)),
                ..ChatCompletion::new(&id, unix_now(), &model, choice, usage)
            };
            Ok(Json(completion).into_response())
        }
        Some(ChatEvent::Error {
            reason, message, ..
        }) => Err(AppError::TurnFailed { reason, message }),
        _ => Err(AppError::Internal(
            "the turn ended without a terminal event".into(),
        )),
    }
}

/// Calls started but not answered: at a `client_tool_calls` stop, the ones to hand back.
fn track_pending(pending: &mut Vec<ToolCall>, event: &ChatEvent) {
    match event {
        ChatEvent::ToolCallStart {
            id,
            name,
            arguments,
        } => pending.push(ToolCall::new(id.clone(), name.clone(), arguments.clone())),
        ChatEvent::ToolCallResult { id, .. } => pending.retain(|c| &c.id != id),
        _ => {}
    }
}

fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::ClientToolCalls => "tool_calls",
        StopReason::Truncated => "length",
        _ => "stop",
    }
}

/// The streamed form: text as it comes, client tool calls at the end, usage, `[DONE]`.
fn stream_response(
    state: &AppState,
    turn: crate::turns::StartedTurn,
    id: String,
    model: String,
    include_usage: bool,
) -> Response {
    let created = unix_now();
    let turn_id = turn.turn_id.clone();
    let last = {
        let (id, model) = (id.clone(), model.clone());
        move |usage: ChatUsage| sse::json_frame(None, &Chunk::usage(&id, created, &model, usage))
    };
    let chunk = move |delta: Delta, finish_reason: Option<&'static str>| {
        let chunk = Chunk {
            usage: include_usage.then_some(None),
            ..Chunk::new(&id, created, &model, delta, finish_reason)
        };
        sse::json_frame(None, &chunk)
    };
    struct Streaming {
        events: crate::turn_log::Watch<ChatEvent>,
        _guard: Option<CancelOnDrop>,
        pending: Vec<ToolCall>,
        queued: std::collections::VecDeque<Bytes>,
        narrated: bool,
        streamed_text: bool,
        done: bool,
    }
    let first = chunk(Delta::opening(), None);
    let state = Streaming {
        events: turn.events,
        _guard: disconnect_guard(state, turn.cancel),
        pending: Vec::new(),
        queued: std::collections::VecDeque::from([first]),
        narrated: false,
        streamed_text: false,
        done: false,
    };
    let stream = futures::stream::unfold(state, move |mut s| {
        let (chunk, last) = (chunk.clone(), last.clone());
        async move {
            loop {
                if let Some(event) = s.queued.pop_front() {
                    return Some((event, s));
                }
                if s.done {
                    return None;
                }
                let Some(event) = s.events.recv().await else {
                    s.done = true;
                    s.queued.push_back(sse::text_frame(None, "[DONE]"));
                    continue;
                };
                track_pending(&mut s.pending, &event);
                match event {
                    ChatEvent::TextDelta { text } => {
                        // Narration of an earlier tool round is separated from what follows
                        // (only when some text was streamed before it).
                        let text = if s.narrated && s.streamed_text {
                            format!("\n\n{text}")
                        } else {
                            text
                        };
                        s.narrated = false;
                        s.streamed_text = true;
                        s.queued.push_back(chunk(Delta::text(text), None));
                    }
                    ChatEvent::IterationStats {
                        tool_calls_requested,
                        ..
                    } => s.narrated |= tool_calls_requested > 0,
                    ChatEvent::Done { reason, stats, .. } => {
                        if reason == StopReason::ClientToolCalls {
                            let calls = s
                                .pending
                                .iter()
                                .enumerate()
                                .map(|(i, c)| {
                                    OutputToolCall::whole(
                                        Some(i),
                                        &c.id,
                                        &c.name,
                                        c.arguments.clone(),
                                    )
                                })
                                .collect();
                            s.queued.push_back(chunk(Delta::calls(calls), None));
                        }
                        s.queued
                            .push_back(chunk(Delta::default(), Some(finish_reason(reason))));
                        if include_usage {
                            s.queued.push_back(last(ChatUsage::new(
                                stats.input_tokens,
                                stats.output_tokens,
                            )));
                        }
                    }
                    ChatEvent::Error {
                        reason, message, ..
                    } => {
                        let error = AppError::TurnFailed { reason, message };
                        s.queued.push_back(sse::json_frame(None, &error.body()));
                    }
                    _ => {}
                }
            }
        }
    });
    with_turn_header(sse::respond(stream), &turn_id)
}

/// Names the turn a streamed response watches (`buddy-turn-id`), so a client whose
/// stream broke can reattach at `GET /v1/turns/{id}/events`.
pub(crate) fn with_turn_header(mut response: Response, turn_id: &str) -> Response {
    if let Ok(value) = axum::http::HeaderValue::from_str(turn_id) {
        response.headers_mut().insert("buddy-turn-id", value);
    }
    response
}
