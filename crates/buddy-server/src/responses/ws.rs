//! `/v1/responses` over a WebSocket (the Open Responses WebSocket mode). The client sends
//! `response.create` events — a create body plus `"type": "response.create"` — one at a
//! time; buddy answers each with the events the SSE stream carries, as JSON text
//! messages, the terminal one last. The connection keeps its latest response's
//! conversation, so a `store: false` response can be continued by `previous_response_id`
//! on the same connection (and only there: after a reconnect, or once a continuation of
//! it failed, it is `previous_response_not_found`).
//!
//! A session keeps its connection's place in the connection table (shed like any idle
//! connection between responses; at most `max_websockets_per_key` per key); it is closed
//! after `websocket_idle_secs` without a request (pings do not count), when a message
//! it sends is not taken within `websocket_send_secs`, and with a close frame (1009) on
//! a message over `max_body_bytes`.

use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::ws::{
    CloseFrame, Message as WsMessage, WebSocket, WebSocketUpgrade, close_code,
};
use axum::response::Response;
use buddy_core::ChatEvent;
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;

use super::begin::{ResponsesRequest, Unstored, begin};
use super::builder::Builder;
use super::ids::conversation_of;
use crate::caller::Caller;
use crate::conn::{Progress, Session};
use crate::error::AppError;
use crate::request::Client;
use crate::state::AppState;
use crate::turn::{CancelOnDrop, StartedTurn, Turns};

/// The error code of a continuation the server cannot find.
const NOT_FOUND: &str = "previous_response_not_found";

/// How `tungstenite` (under axum's `ws`) shows a message or frame over the size limit.
const TOO_BIG: &str = "Space limit exceeded";

pub(crate) async fn upgrade(
    Client { state, caller }: Client,
    progress: Option<Extension<Arc<Progress>>>,
    ws: WebSocketUpgrade,
) -> Result<Response, AppError> {
    // Under `serve` the connection table holds the session's place (and sheds the idlest
    // for a newcomer); without it, the server's own count of sessions bounds them.
    let (place, permit) = match &progress {
        Some(Extension(progress)) => (Some(progress.session(&caller.owner)?), None),
        None => {
            let permit = Arc::clone(&state.inner.websockets)
                .try_acquire_owned()
                .map_err(|_| {
                    AppError::TooManyTurns(
                        "the server holds as many WebSocket sessions as it takes (max_connections); close idle ones or retry shortly".into(),
                    )
                })?;
            (None, Some(permit))
        }
    };
    let limit = state.inner.settings.max_body_bytes;
    Ok(ws
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| {
            let held = Held {
                place,
                _permit: permit,
            };
            session(state, caller, socket, held)
        }))
}

/// What a session holds while it lives: its connection's place in the table (absent
/// when the router runs without `serve`) and its share of the server's sessions.
struct Held {
    place: Option<Session>,
    _permit: Option<OwnedSemaphorePermit>,
}

/// Resolves when the table sheds the session; never without a table.
async fn shed(place: Option<&Session>) {
    match place {
        Some(place) => place.evicted().await,
        None => std::future::pending().await,
    }
}

/// One connection: its requests in order, each run to its end before the next is read.
/// A connection without a request for `websocket_idle_timeout` is closed.
async fn session(state: AppState, caller: Caller, mut socket: WebSocket, held: Held) {
    let mut last: Option<Unstored> = None;
    let settings = &state.inner.settings;
    let (idle, within) = (
        settings.websocket_idle_timeout,
        settings.websocket_send_timeout,
    );
    let mut deadline = tokio::time::Instant::now() + idle;
    loop {
        let message = tokio::select! {
            message = tokio::time::timeout_at(deadline, socket.recv()) => match message {
                Ok(Some(Ok(message))) => message,
                Ok(Some(Err(error))) if error.to_string().contains(TOO_BIG) => {
                    let reason = format!("a message may hold at most {} bytes", settings.max_body_bytes);
                    close(&mut socket, close_code::SIZE, &reason, within).await;
                    break;
                }
                // Silent too long, closed, or broken.
                _ => break,
            },
            () = state.inner.shutdown.cancelled() => break,
            () = shed(held.place.as_ref()) => {
                close(&mut socket, close_code::AGAIN, "the server needed room; reconnect", within).await;
                break;
            }
        };
        let text = match message {
            WsMessage::Text(text) => text.to_string(),
            WsMessage::Binary(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            WsMessage::Close(_) => break,
            _ => continue,
        };
        let request = match create_event(&text) {
            Ok(request) => request,
            Err(error) => {
                if send(&mut socket, &error.websocket_event(None), within)
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
        };
        let unstored = match &request.previous_response_id {
            // Used once: a continuation that fails leaves nothing to continue from.
            Some(previous) if last.as_ref().is_some_and(|l| &l.id == previous) => last.take(),
            Some(previous) if conversation_of(previous).is_none() => {
                let error = AppError::NotFound(format!(
                    "response `{previous}` is not on this connection: a store: false response can be \
                     continued only on the connection that made it, as its latest response; start a \
                     new response with the whole input"
                ));
                if send(&mut socket, &error.websocket_event(Some(NOT_FOUND)), within)
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            _ => None,
        };
        // A request: the idle time counts from its end, and it is not shed meanwhile.
        let answering = held.place.as_ref().map(Session::answering);
        let continuing = request.previous_response_id.is_some();
        let keep = request.store == Some(false);
        let turns = Turns(Client {
            state: state.clone(),
            caller: caller.clone(),
        });
        match begin(&turns, request, unstored, None).await {
            Ok((turn, builder)) => match run(&mut socket, turn, builder, keep, within).await {
                Ok(kept) => last = kept,
                Err(()) => return,
            },
            Err(error) => {
                last = None;
                let code = match (&error, continuing) {
                    (AppError::NotFound(_), true) => Some(NOT_FOUND),
                    _ => None,
                };
                if send(&mut socket, &error.websocket_event(code), within)
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
        drop(answering);
        deadline = tokio::time::Instant::now() + idle;
    }
}

/// Sends a close frame (within `within`) before the session ends.
async fn close(socket: &mut WebSocket, code: u16, reason: &str, within: Duration) {
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = tokio::time::timeout(within, socket.send(WsMessage::Close(Some(frame)))).await;
}

/// The `ResponsesRequest` of a `response.create` event, or what is wrong with it.
fn create_event(text: &str) -> Result<ResponsesRequest, AppError> {
    let mut event: Value = serde_json::from_str(text)
        .map_err(|e| AppError::BadRequest(format!("the message is not JSON: {e}")))?;
    match event.get("type").and_then(Value::as_str) {
        Some("response.create") => {}
        other => {
            return Err(AppError::BadRequest(format!(
                "unknown event type {}: send {{\"type\": \"response.create\", …}} with a Responses create body",
                other.map_or("(none)".to_owned(), |t| format!("`{t}`"))
            )));
        }
    }
    if let Some(object) = event.as_object_mut() {
        object.remove("type");
        // Every event is streamed; `stream` has no say here.
        object.remove("stream");
    }
    serde_json::from_value(event).map_err(|e| {
        AppError::BadRequest(format!(
            "the response.create event is not a valid create body: {e}"
        ))
    })
}

/// Streams one response's events; returns the conversation to keep for a `store: false`
/// response that completed, or `Err` when the client went away (the turn is cancelled).
async fn run(
    socket: &mut WebSocket,
    turn: StartedTurn,
    mut builder: Builder,
    keep: bool,
    within: Duration,
) -> Result<Option<Unstored>, ()> {
    let StartedTurn {
        mut events,
        cancel,
        messages,
        ..
    } = turn;
    let _guard = CancelOnDrop(cancel);
    for (_, data) in builder.opening() {
        send(socket, &data, within).await?;
    }
    let mut completed = false;
    while let Some(event) = events.recv().await {
        if let ChatEvent::Done { .. } = &event {
            completed = true;
        }
        for (kind, data) in builder.on_event(event) {
            // Over a WebSocket an `error` event ends the client's wait for this response;
            // a failed turn's `response.failed` (which carries the error) does that here.
            if kind == "error" {
                continue;
            }
            send(socket, &data, within).await?;
        }
    }
    if !(keep && completed) {
        return Ok(None);
    }
    let history = match messages {
        Some(messages) => messages.await.unwrap_or_default(),
        None => return Ok(None),
    };
    Ok(Some(Unstored {
        id: builder.id.clone(),
        history,
    }))
}

/// Sends one event; `Err` when the client is gone or does not take it within `within`.
async fn send(socket: &mut WebSocket, data: &Value, within: Duration) -> Result<(), ()> {
    let message = WsMessage::Text(data.to_string().into());
    match tokio::time::timeout(within, socket.send(message)).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(()),
    }
}
