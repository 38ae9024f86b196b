//! Errors in Anthropic's shape: every error response of the Messages routes (and of the
//! model list asked with `anthropic-version`), written again from what it was.

use axum::Json;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use buddy_anthropic_wire::{ErrorBody, error_type_for_status};

use crate::error::ErrorInfo;

/// Anthropic's status for overloaded (not in `http`'s table).
const OVERLOADED: u16 = 529;

/// Rewrites an error response of an Anthropic client's request in Anthropic's shape
/// (`{"type": "error", "error": {"type", "message"}}`), keeping its other headers.
pub(crate) async fn anthropic_errors(request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let anthropic = path.starts_with("/v1/messages")
        || (path == "/v1/models" && request.headers().contains_key("anthropic-version"));
    let response = next.run(request).await;
    if !anthropic {
        return response;
    }
    let Some(info) = response.extensions().get::<ErrorInfo>().cloned() else {
        return response;
    };
    let (status, body) = anthropic_error(&info);
    let (mut parts, _) = response.into_parts();
    let mut rewritten = (status, Json(body)).into_response();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    for (name, value) in &parts.headers {
        rewritten.headers_mut().insert(name.clone(), value.clone());
    }
    rewritten
}

/// The status and body Anthropic would send for `info`.
pub(crate) fn anthropic_error(info: &ErrorInfo) -> (StatusCode, ErrorBody) {
    let status = match info.overloaded {
        true => StatusCode::from_u16(OVERLOADED).unwrap_or(info.status),
        false => info.status,
    };
    let kind = error_type_for_status(status.as_u16());
    (status, ErrorBody::new(kind, info.message.clone()))
}
