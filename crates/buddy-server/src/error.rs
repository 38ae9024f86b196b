//! One error type for every endpoint: a status and an OpenAI-style JSON body.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use buddy_core::StopReason;
use serde_json::json;

/// Everything an endpoint can refuse with. Messages say what was wrong and what to do;
/// internals are logged, never sent.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    BadRequest(String),
    #[error("missing or wrong API key: send `Authorization: Bearer <key>`")]
    Unauthorized,
    #[error("{0}")]
    NotFound(String),
    #[error("the request body is larger than {0} bytes")]
    TooLarge(usize),
    #[error("the request body did not arrive within {} s; send it at once", .0.as_secs_f64())]
    BodyTimeout(std::time::Duration),
    #[error("{0}")]
    TooManyTurns(String),
    /// The caller's key has spent its daily or monthly ceiling: 429 as `TooManyTurns`
    /// (its own variant so that a family can answer it another way).
    #[error("{0}")]
    AtCeiling(String),
    /// A key at a quota that time alone does not lift (its storage): 429, not retried.
    #[error("{0}")]
    Quota(String),
    #[error("{0}")]
    Conflict(String),
    #[error("the server is shutting down; retry against another instance or later")]
    ShuttingDown,
    /// The conversation store failed before anything ran; the same request may succeed later.
    #[error(
        "the conversation store failed ({0}); no model was called and nothing was changed — retry shortly"
    )]
    Store(String),
    #[error("internal error; the server log has the details")]
    Internal(String),
    /// The turn ran but ended without an answer (provider failure, limit with on_limit = error).
    #[error("turn ended ({reason}): {message}")]
    TurnFailed { reason: StopReason, message: String },
}

impl AppError {
    fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::Unauthorized => StatusCode::UNAUTHORIZED,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            AppError::TooManyTurns(_) | AppError::AtCeiling(_) | AppError::Quota(_) => {
                StatusCode::TOO_MANY_REQUESTS
            }
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::ShuttingDown | AppError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            AppError::TurnFailed { reason, .. } => match reason {
                // The client's request: a malformed history, or more than the model's window.
                StopReason::InvalidRequest | StopReason::ContextOverflow => StatusCode::BAD_REQUEST,
                // The model server failed (after buddy's own retries).
                StopReason::ProviderError => StatusCode::BAD_GATEWAY,
                StopReason::SkillFailed | StopReason::StoreError => {
                    StatusCode::INTERNAL_SERVER_ERROR
                }
                // A limit or loop guard with on_limit = "error": the same request hits it again.
                _ => StatusCode::UNPROCESSABLE_ENTITY,
            },
        }
    }

    /// Whether a client may send the same request again: only when nothing ran (busy,
    /// shutting down, or the store failed before the turn began). A failed turn already ran its model calls, and buddy already
    /// retried the model server; sending it again would run the whole turn again.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            AppError::TooManyTurns(_)
                | AppError::AtCeiling(_)
                | AppError::ShuttingDown
                | AppError::Conflict(_)
                | AppError::Store(_)
        )
    }

    fn kind(&self) -> &'static str {
        match self {
            AppError::BadRequest(_) | AppError::TooLarge(_) | AppError::BodyTimeout(_) => {
                "invalid_request_error"
            }
            AppError::Unauthorized => "authentication_error",
            AppError::NotFound(_) => "not_found_error",
            AppError::TooManyTurns(_) | AppError::AtCeiling(_) => "rate_limit_error",
            AppError::Quota(_) => "insufficient_quota",
            AppError::Conflict(_) => "conflict_error",
            AppError::ShuttingDown => "unavailable",
            AppError::Store(_) => "store_error",
            AppError::Internal(_) => "server_error",
            AppError::TurnFailed {
                reason: StopReason::InvalidRequest | StopReason::ContextOverflow,
                ..
            } => "invalid_request_error",
            AppError::TurnFailed { .. } => "turn_failed",
        }
    }

    /// The error as a WebSocket `error` event (the Open Responses WebSocket mode):
    /// `code` names it for machines (default: its type).
    pub fn websocket_event(&self, code: Option<&str>) -> serde_json::Value {
        json!({"type": "error", "status": self.status().as_u16(), "error": {
            "type": self.kind(),
            "code": code.unwrap_or(self.code()),
            "message": self.to_string(),
        }})
    }

    /// A short machine-readable name of the error (the `code` of the error object, a
    /// string as in OpenAI's and Open Responses' errors): for a failed turn, its stop reason.
    pub fn code(&self) -> &'static str {
        match self {
            AppError::BadRequest(_) => "invalid_request",
            AppError::Unauthorized => "invalid_api_key",
            AppError::NotFound(_) => "not_found",
            AppError::TooLarge(_) => "request_too_large",
            AppError::BodyTimeout(_) => "request_timeout",
            AppError::TooManyTurns(_) | AppError::AtCeiling(_) => "rate_limit_exceeded",
            AppError::Quota(_) => "insufficient_quota",
            AppError::Conflict(_) => "conflict",
            AppError::ShuttingDown => "shutting_down",
            AppError::Store(_) => "store_error",
            AppError::Internal(_) => "internal_error",
            AppError::TurnFailed { reason, .. } => reason.as_str(),
        }
    }

    /// The JSON error object (`{"error": {...}}`), also used inside streams; `status` is
    /// the HTTP status it comes with.
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {
            "message": self.to_string(),
            "type": self.kind(),
            "code": self.code(),
            "param": null,
            "status": self.status().as_u16(),
        }})
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        if let AppError::Internal(detail) = &self {
            tracing::error!(%detail, "internal error");
        }
        // The official OpenAI SDKs honour `x-should-retry` before their own status rules
        // (which would retry every 5xx twice).
        let retry = if self.retryable() { "true" } else { "false" };
        let info = self.info();
        let mut response = (
            self.status(),
            [("x-should-retry", retry)],
            Json(self.body()),
        )
            .into_response();
        response.extensions_mut().insert(info);
        response
    }
}

/// What an error response was, kept on it so that an API family with another error
/// shape (Anthropic's) can write it its own way.
#[derive(Clone, Debug)]
pub(crate) struct ErrorInfo {
    pub status: StatusCode,
    pub message: String,
    /// The model server said it was overloaded (Anthropic's 529).
    pub overloaded: bool,
}

impl AppError {
    /// What the error is, apart from its JSON shape.
    pub(crate) fn info(&self) -> ErrorInfo {
        let overloaded = match self {
            AppError::TurnFailed {
                reason: StopReason::ProviderError,
                message,
            } => overloaded_message(message),
            _ => false,
        };
        ErrorInfo {
            status: self.status(),
            message: self.to_string(),
            overloaded,
        }
    }
}

/// Whether a provider's error message says it was overloaded.
fn overloaded_message(message: &str) -> bool {
    message.contains("HTTP 529") || message.to_ascii_lowercase().contains("overloaded")
}

impl From<buddy_store::StoreError> for AppError {
    fn from(e: buddy_store::StoreError) -> Self {
        match e {
            buddy_store::StoreError::NotFound(id) => {
                AppError::NotFound(format!("conversation `{id}` does not exist"))
            }
            buddy_store::StoreError::Backend(detail) => {
                tracing::error!(%detail, "conversation store failed");
                AppError::Store(detail)
            }
            corrupt @ buddy_store::StoreError::Corrupt(_) => {
                AppError::Internal(corrupt.to_string())
            }
        }
    }
}
