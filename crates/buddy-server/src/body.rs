//! Request bodies, read whole before any handler runs: within `body_timeout` from the
//! request head in all (a body trickled byte by byte is cut off like a silent one) and
//! within `max_body_bytes`; a body that breaks off or is malformed (bad chunked
//! encoding) is a 400 that says so.

use std::sync::Arc;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;

use crate::conn::Progress;
use crate::error::AppError;
use crate::state::AppState;

/// Reads the request's body whole under the server's limits, then hands the request on.
pub(crate) async fn whole_body(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, AppError> {
    let settings = &state.inner.settings;
    let (limit, deadline) = (settings.max_body_bytes, settings.body_timeout);
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(AppError::TooLarge(limit));
    }
    let bytes = if body.size_hint().exact() == Some(0) {
        Bytes::new()
    } else {
        match tokio::time::timeout(deadline, read(body, limit)).await {
            Err(_) => return Err(AppError::BodyTimeout(deadline)),
            Ok(read) => read?,
        }
    };
    if let Some(progress) = parts.extensions.get::<Arc<Progress>>() {
        progress.body_received();
    }
    Ok(next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await)
}

async fn read(body: Body, limit: usize) -> Result<Bytes, AppError> {
    let mut frames = body.into_data_stream();
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = frames.next().await {
        let chunk = frame.map_err(|e| {
            AppError::BadRequest(format!(
                "the request body could not be read ({e}); send it whole, with a correct \
                 Content-Length or chunked encoding"
            ))
        })?;
        total += chunk.len();
        if total > limit {
            return Err(AppError::TooLarge(limit));
        }
        chunks.push(chunk);
    }
    Ok(match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.swap_remove(0),
        _ => Bytes::from(chunks.concat()),
    })
}
