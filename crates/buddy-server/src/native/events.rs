//! `GET /v1/turns/{id}/events?after=N`: the events numbered above `N` (or above the
//! `Last-Event-ID` a reconnecting client sends), then the live ones, until the turn's
//! terminal event.

use axum::extract::{Path, Query};
use axum::http::HeaderMap;
use axum::response::Response;
use buddy_core::ChatEvent;
use serde::Deserialize;

use crate::error::AppError;
use crate::request::Client;
use crate::sse;
use crate::turn::watch::{
    Numbered, Reader, gone, may_watch, register_reader, remote_frames, start_after,
};
use crate::turn::{Turns, frames};

/// The query of `GET /v1/turns/{id}/events`.
#[derive(Deserialize)]
pub(crate) struct EventsQuery {
    after: Option<String>,
}

/// `GET /v1/turns/{id}/events`.
pub(crate) async fn events(
    turns: Turns,
    Path(id): Path<String>,
    Query(query): Query<EventsQuery>,
    headers: HeaderMap,
    reader: Reader,
) -> Result<Response, AppError> {
    let after = start_after(&headers, query.after.as_deref())?;
    let Client { state, caller } = &*turns;
    register_reader(&reader, caller)?;
    if let Some(log) = state.inner.logs.get::<ChatEvent>(&id) {
        if !may_watch(caller, &log.owner) {
            return Err(gone(state, &id));
        }
        let numbered = frames(log.watch(after), Numbered::default(), None);
        return Ok(sse::respond(numbered));
    }
    let kept = remote_frames(state, caller, &id, &id, after).await?;
    Ok(sse::respond(kept))
}
