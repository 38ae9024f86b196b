//! The stored-response routes of the Responses API, over buddy's own store: a response
//! is one turn of a stored conversation, so it is rebuilt from that turn's messages and
//! record.
//!
//! - `GET /v1/responses/{id}`: the response as it was returned (its output items, usage,
//!   status), or `in_progress` while its turn runs;
//! - `GET /v1/responses/{id}/input_items`: what the request added before the turn ran;
//! - `DELETE /v1/responses/{id}`: deletes that response only (responses form a tree:
//!   the ones it continues stay, the ones that continue it keep their context);
//! - `POST /v1/responses/{id}/cancel`: stops the response's turn while it runs.
//!
//! Every route answers `404` for a response of another key, as for one that never was.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::response::{IntoResponse, Response};
use buddy_core::{ChatEvent, FinishReason, Message, StopReason};
use buddy_store::{ConversationDetail, TurnDeletion, TurnEnd, TurnRecord};
use futures::StreamExt;
use serde_json::{Value, json};

use super::builder::Builder;
use super::ids::{conversation_of, turn_of};
use super::items::{list, message_items};
use super::log::stream;
use crate::caller::Caller;
use crate::error::AppError;
use crate::request::{Client, owned_conversation};
use crate::sse;
use crate::state::AppState;
use crate::turn::frames;
use crate::turn::watch::{Numbered, Reader, may_watch, register_reader, remote_frames};
use crate::turn_log::Frame;

/// A stored response's conversation and turn.
struct Located {
    conversation: String,
    turn: String,
    detail: ConversationDetail,
}

fn not_found(id: &str) -> AppError {
    AppError::NotFound(format!(
        "response `{id}` does not exist (or was not stored: store: false keeps nothing)"
    ))
}

/// Finds response `id` among the caller's stored conversations.
async fn locate(state: &AppState, caller: &Caller, id: &str) -> Result<Located, AppError> {
    let conversation = conversation_of(id).ok_or_else(|| not_found(id))?;
    owned_conversation(state, caller, &conversation)
        .await
        .map_err(|_| not_found(id))?;
    let turn = turn_of(id).ok_or_else(|| not_found(id))?;
    let detail = state
        .inner
        .store
        .get_conversation(&conversation)
        .await?
        .ok_or_else(|| not_found(id))?;
    if detail.live_turn(&turn).is_none() {
        return Err(not_found(id));
    }
    Ok(Located {
        conversation,
        turn,
        detail,
    })
}

impl Located {
    /// The turn's messages, in order.
    fn messages(&self) -> Vec<&Message> {
        self.detail
            .messages
            .iter()
            .zip(&self.detail.message_turns)
            .filter(|(_, turn)| **turn == self.turn)
            .map(|(m, _)| m)
            .collect()
    }

    /// Where the turn's output starts: its first assistant message.
    fn output_start(&self) -> usize {
        let messages = self.messages();
        messages
            .iter()
            .position(|m| matches!(m, Message::Assistant { .. }))
            .unwrap_or(messages.len())
    }
}

/// The query of `GET /v1/responses/{id}`.
#[derive(serde::Deserialize)]
pub(crate) struct RetrieveQuery {
    /// Stream the response's events (while it runs, and for a while after it ends).
    #[serde(default)]
    stream: Option<String>,
    /// With `stream`: only the events whose `sequence_number` is above this.
    starting_after: Option<String>,
}

/// `GET /v1/responses/{id}`: the response as it stands, or (`?stream=true`) its events
/// from the start or after `starting_after`, then the live ones.
pub(crate) async fn retrieve(
    Client { state, caller }: Client,
    Path(id): Path<String>,
    Query(query): Query<RetrieveQuery>,
    reader: Reader,
) -> Result<Response, AppError> {
    if query
        .stream
        .as_deref()
        .is_some_and(|s| s == "true" || s == "1")
    {
        register_reader(&reader, &caller)?;
        // The log's numbers are the events' sequence numbers + 1.
        let after = match query.starting_after.as_deref() {
            None => 0,
            Some(n) => n
                .trim()
                .parse::<u64>()
                .map(|n| n.saturating_add(1))
                .map_err(|_| {
                    AppError::BadRequest(format!(
                        "`starting_after` must be a sequence number, not `{n}`"
                    ))
                })?,
        };
        // Whose response it is, its log says: the conversation need not be read.
        if let Some(log) = state.inner.logs.get::<Frame>(&id) {
            if !may_watch(&caller, &log.owner) {
                return Err(not_found(&id));
            }
            let numbered = frames(log.watch(after), Numbered::default(), None);
            return Ok(stream(numbered));
        }
        return replayed(&state, &caller, &id, after).await;
    }
    let found = locate(&state, &caller, &id).await?;
    let (mut builder, record) = rebuilder(&state, &caller, &id, &found)?;
    rebuild(&mut builder, &found, record);
    Ok(Json(builder.response()).into_response())
}

/// A builder for stored response `id`, and its turn's record.
fn rebuilder<'f>(
    state: &AppState,
    caller: &Caller,
    id: &str,
    found: &'f Located,
) -> Result<(Builder, &'f TurnRecord), AppError> {
    let record = found
        .detail
        .turns
        .iter()
        .find(|t| t.id == found.turn)
        .ok_or_else(|| not_found(id))?;
    let origin = record.response.clone().unwrap_or_default();
    let mut builder = Builder::new(
        std::sync::Arc::clone(&state.inner.items),
        id.to_owned(),
        caller.owner.clone(),
        record.model.clone(),
        None,
        origin.previous_response_id,
    );
    builder.background = origin.background;
    builder.created_at = u64::try_from(record.started_at_ms / 1000).unwrap_or(0);
    Ok((builder, record))
}

/// The stream of a response that was not streamed, or whose stream's events are no
/// longer kept: made again from its turn — live from the turn's events while it runs
/// here, from the store once it has ended — numbered as its own stream was.
async fn replayed(
    state: &AppState,
    caller: &Caller,
    id: &str,
    after: u64,
) -> Result<Response, AppError> {
    let found = match locate(state, caller, id).await {
        Ok(found) => found,
        // Not in this instance's store view yet, or running elsewhere: its events there.
        Err(_) => {
            let turn = turn_of(id).ok_or_else(|| not_found(id))?;
            let kept = remote_frames(state, caller, id, &turn, after).await?;
            return Ok(stream(kept));
        }
    };
    let (mut builder, record) = rebuilder(state, caller, id, &found)?;
    let numbered = move |(n, (name, data)): (usize, (String, Value))| {
        let seq = n as u64 + 1;
        (seq > after).then(|| sse::numbered_frame(seq, &name, &data.to_string()))
    };
    if record.finished_at_ms.is_none() {
        let Some(log) = state.inner.logs.get::<ChatEvent>(&found.turn) else {
            let kept = remote_frames(state, caller, id, &found.turn, after).await?;
            return Ok(stream(kept));
        };
        let live = frames(log.watch(0), builder, None)
            .enumerate()
            .filter_map(move |event| std::future::ready(numbered(event)));
        return Ok(stream(live));
    }
    let mut events = builder.opening();
    events.extend(rebuild(&mut builder, &found, record));
    let frames: Vec<Bytes> = events
        .into_iter()
        .enumerate()
        .filter_map(numbered)
        .collect();
    Ok(stream(futures::stream::iter(frames)))
}

/// Plays a stored turn's messages and end into `builder`; the stream events it made.
fn rebuild(builder: &mut Builder, found: &Located, record: &TurnRecord) -> Vec<(String, Value)> {
    let mut events = Vec::new();
    let messages = found.messages();
    let start = found.output_start();
    let reason = record.stop_reason.and_then(TurnEnd::stop_reason);
    // A cancelled turn's last message without calls is the reply the cancel cut short:
    // left open, the turn's end closes it `incomplete`, as its stream did.
    let cut_short = (reason == Some(StopReason::Cancelled))
        .then(|| messages.len().checked_sub(1))
        .flatten()
        .filter(|&last| {
            last >= start
                && matches!(messages[last], Message::Assistant { tool_calls, .. } if tool_calls.is_empty())
        });
    for (at, message) in messages.iter().enumerate().skip(start) {
        match message {
            Message::Assistant {
                content,
                tool_calls,
            } => {
                if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                    events.extend(builder.on_event(ChatEvent::TextDelta {
                        text: text.to_owned(),
                    }));
                }
                if cut_short == Some(at) {
                    continue;
                }
                events.extend(builder.on_event(stats_event(tool_calls.len())));
                for call in tool_calls {
                    events.extend(builder.on_event(ChatEvent::ToolCallStart {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                    }));
                }
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
            } => {
                events.extend(builder.on_event(ChatEvent::ToolCallResult {
                    id: tool_call_id.clone(),
                    name: String::new(),
                    content: content.clone(),
                    is_error: *is_error,
                }));
            }
            _ => {}
        }
    }
    let stats = record.stats.unwrap_or_default();
    let end = match (reason, record.finished_at_ms) {
        (Some(reason), Some(_)) if record.error.is_none() => Some(ChatEvent::Done {
            reason,
            answer: String::new(),
            stats,
        }),
        (Some(reason), Some(_)) => Some(ChatEvent::Error {
            reason,
            message: record.error.clone().unwrap_or_default(),
            stats,
        }),
        // Still running: the response as it stands.
        _ => None,
    };
    if let Some(end) = end {
        events.extend(builder.on_event(end));
    }
    if let Some(finished) = record.finished_at_ms {
        builder.completed_at = Some(u64::try_from(finished / 1000).unwrap_or(0));
    }
    events
}

/// The `iteration_stats` that closes a rebuilt model call (only its tool-call count is read).
fn stats_event(calls: usize) -> ChatEvent {
    ChatEvent::IterationStats {
        model_call: 0,
        finish_reason: Some(match calls {
            0 => FinishReason::Stop,
            _ => FinishReason::ToolCalls,
        }),
        tool_calls_requested: u32::try_from(calls).unwrap_or(u32::MAX),
        tools_offered: 0,
        input_tokens: 0,
        output_tokens: 0,
        context_tokens: 0,
        context_window: 0,
        elapsed_ms: 0,
        cost_usd: None,
    }
}

/// `GET /v1/responses/{id}/input_items`: the items the request added, oldest first.
pub(crate) async fn input_items(
    Client { state, caller }: Client,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    let found = locate(&state, &caller, &id).await?;
    let messages = found.messages();
    let start = found.output_start();
    let hex = id.trim_start_matches("resp_");
    let items: Vec<Value> = messages[..start]
        .iter()
        .enumerate()
        .flat_map(|(i, message)| message_items(message, &format!("in_{hex}_{i}")))
        .collect();
    Ok(Json(list(items)))
}

/// `DELETE /v1/responses/{id}`: deletes that response only. Responses that continue it
/// keep their context (its messages stay as theirs, hidden); the one it continues stays.
pub(crate) async fn delete(
    Client { state, caller }: Client,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    let found = locate(&state, &caller, &id).await?;
    if state.inner.coordinator.is_running(&found.turn).await? {
        return Err(AppError::Conflict(format!(
            "response `{id}` is in progress; cancel it (POST /v1/responses/{id}/cancel) or delete it once it has ended"
        )));
    }
    let deleted = state
        .inner
        .store
        .delete_turn(&found.conversation, &found.turn)
        .await?;
    if deleted == TurnDeletion::NotFound {
        return Err(not_found(&id));
    }
    Ok(Json(
        json!({"id": id, "object": "response", "deleted": true}),
    ))
}

/// `POST /v1/responses/{id}/cancel`: stops the response's turn while it runs, and
/// answers the response as it stands, `cancelled`.
pub(crate) async fn cancel(
    Client { state, caller }: Client,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    let found = locate(&state, &caller, &id).await?;
    let owner = (!caller.admin).then_some(caller.owner.as_str());
    if !state.cancel_turn(&found.turn, owner).await? {
        return Err(AppError::Conflict(format!(
            "response `{id}` is not in progress: only a running response can be cancelled"
        )));
    }
    // The turn stops soon: its end (with the text streamed so far) is answered once it
    // is stored, the response as it stood if it takes longer.
    let found = match ended_soon(&state, &caller, &id).await {
        Some(ended) => ended,
        None => found,
    };
    let (mut builder, record) = rebuilder(&state, &caller, &id, &found)?;
    rebuild(&mut builder, &found, record);
    if record.finished_at_ms.is_none() {
        builder.cancelled();
    }
    Ok(Json(
        serde_json::to_value(builder.response()).unwrap_or(Value::Null),
    ))
}

/// How long `cancel` waits for the cancelled turn's end to be stored.
const CANCEL_SETTLES: std::time::Duration = std::time::Duration::from_secs(2);

/// Response `id` once its turn's end is stored, read again every few milliseconds for
/// at most [`CANCEL_SETTLES`]; `None` if it has not ended by then.
async fn ended_soon(state: &AppState, caller: &Caller, id: &str) -> Option<Located> {
    let until = tokio::time::Instant::now() + CANCEL_SETTLES;
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        let found = locate(state, caller, id).await.ok()?;
        let ended = found
            .detail
            .turns
            .iter()
            .any(|t| t.id == found.turn && t.finished_at_ms.is_some());
        if ended {
            return Some(found);
        }
    }
    None
}
