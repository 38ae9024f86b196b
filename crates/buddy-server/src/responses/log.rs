//! A response's own events (the API's, in its order, numbered as its
//! `sequence_number` + 1) in a log of their own, made from the turn's as it runs, so that
//! `GET /v1/responses/{id}?stream=true&starting_after=N` can pick the stream up again;
//! and their SSE form.

use std::sync::Arc;

use axum::body::Bytes;
use axum::response::Response;
use futures::StreamExt;

use super::builder::Builder;
use crate::sse;
use crate::state::AppState;
use crate::turn::{StartedTurn, frames};
use crate::turn_log::{EventLog, Frame};

/// Starts the log of `turn`'s response, which `builder` makes, on its own task.
pub(crate) fn response_log(
    state: &AppState,
    turn: StartedTurn,
    builder: Builder,
) -> Arc<EventLog<Frame>> {
    let log = EventLog::new(builder.id.clone(), builder.owner().to_owned());
    // Each lifecycle event repeats the response object, instructions and all: the log
    // holds them once.
    let shared = builder.instructions_json();
    if let Some(shared) = &shared {
        log.hold_shared(shared.len());
    }
    let kept = state.keep_log(&log);
    let into = Arc::clone(&log);
    let mut encoded = Box::pin(frames(turn.events, builder, None));
    state.inner.turns.spawn(async move {
        while let Some((name, data)) = encoded.next().await {
            into.push(Frame::sharing(name, &data, shared.as_ref()));
        }
        into.close();
        kept.ended().await;
    });
    log
}

/// The streamed form of a response's frames, ending with `[DONE]` as the Open Responses
/// specification asks.
pub(crate) fn stream(frames: impl futures::Stream<Item = Bytes> + Send + 'static) -> Response {
    let done = futures::stream::once(async { sse::text_frame(None, "[DONE]") });
    sse::respond(frames.chain(done))
}
