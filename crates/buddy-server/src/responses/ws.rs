//! `/v1/responses` over a WebSocket (the Open Responses WebSocket mode). The client sends
//! `response.create` events — a create body plus `"type": "response.create"` — one at a
//! time; buddy answers each with the events the SSE stream carries, as JSON text
//! messages, the terminal one last. The connection keeps its latest response's
//! conversation, so a `store: false` response can be continued by `previous_response_id`
//! on the same connection (and only there: after a reconnect, or once a continuation of
//! it failed, it is `previous_response_not_found`).

use std::sync::Arc;

use axum::extract::ws::{Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use buddy_core::ChatEvent;
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;

use super::begin::{ResponsesRequest, Unstored, begin};
use super::builder::Builder;
use super::ids::conversation_of;
use crate::auth::Caller;
use crate::error::AppError;
use crate::request::Client;
use crate::state::AppState;
use crate::turn::{CancelOnDrop, StartedTurn, Turns};

/// The error code of a continuation the server cannot find.
const NOT_FOUND: &str = "previous_response_not_found";

pub(crate) async fn upgrade(
    Client { state, caller }: Client,
    ws: WebSocketUpgrade,
) -> Result<Response, AppError> {
    let permit = Arc::clone(&state.inner.websockets)
        .try_acquire_owned()
        .map_err(|_| {
            AppError::TooManyTurns(
                "the server holds as many WebSocket sessions as it takes (max_connections); close idle ones or retry shortly".into(),
            )
        })?;
    let limit = state.inner.settings.max_body_bytes;
    Ok(ws
        .max_message_size(limit)
        .on_upgrade(move |socket| session(state, caller, socket, permit)))
}

/// One connection: its requests in order, each run to its end before the next is read.
/// A connection silent for `websocket_idle_timeout` between requests is closed.
async fn session(
    state: AppState,
    caller: Caller,
    mut socket: WebSocket,
    _permit: OwnedSemaphorePermit,
) {
    let mut last: Option<Unstored> = None;
    let idle = state.inner.settings.websocket_idle_timeout;
    loop {
        let message = tokio::select! {
            message = tokio::time::timeout(idle, socket.recv()) => match message {
                Ok(Some(Ok(message))) => message,
                // Silent too long, closed, or broken.
                _ => break,
            },
            () = state.inner.shutdown.cancelled() => break,
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
                if send(&mut socket, &error.websocket_event(None))
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
                if send(&mut socket, &error.websocket_event(Some(NOT_FOUND)))
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            _ => None,
        };
        let continuing = request.previous_response_id.is_some();
        let keep = request.store == Some(false);
        let turns = Turns(Client {
            state: state.clone(),
            caller: caller.clone(),
        });
        match begin(&turns, request, unstored).await {
            Ok((turn, builder)) => match run(&mut socket, turn, builder, keep).await {
                Ok(kept) => last = kept,
                Err(()) => return,
            },
            Err(error) => {
                last = None;
                let code = match (&error, continuing) {
                    (AppError::NotFound(_), true) => Some(NOT_FOUND),
                    _ => None,
                };
                if send(&mut socket, &error.websocket_event(code))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
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
) -> Result<Option<Unstored>, ()> {
    let StartedTurn {
        mut events,
        cancel,
        messages,
        ..
    } = turn;
    let _guard = CancelOnDrop(cancel);
    for (_, data) in builder.opening() {
        send(socket, &data).await?;
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
            send(socket, &data).await?;
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

async fn send(socket: &mut WebSocket, data: &Value) -> Result<(), ()> {
    socket
        .send(WsMessage::Text(data.to_string().into()))
        .await
        .map_err(|_| ())
}
