//! Bearer-token auth: which caller a request comes from (its key, or the one shared
//! identity of a server without keys), put on the request for every endpoint.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::error::AppError;
use crate::settings::SpendCeiling;
use crate::settings::key_for;
use crate::state::AppState;

/// Who is calling: the identity that owns conversations and quotas.
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    /// For logs and metrics.
    pub name: String,
    /// Conversations and quotas belong to this (a key hash, or `anonymous`).
    pub owner: String,
    pub admin: bool,
    /// What the caller's turns may cost per day and month.
    pub spend: SpendCeiling,
    /// The request's W3C trace context (`traceparent`, `tracestate`), when it sent a
    /// valid one: the turns it starts join that trace.
    pub trace: Option<TraceHeaders>,
}

/// A request's W3C trace context headers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TraceHeaders {
    pub traceparent: String,
    pub tracestate: Option<String>,
}

impl TraceHeaders {
    /// The trace context a request carries, if its `traceparent` is valid.
    fn of(headers: &axum::http::HeaderMap) -> Option<Self> {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let traceparent = text("traceparent").filter(|v| buddy_telemetry::valid_traceparent(v))?;
        Some(TraceHeaders {
            traceparent: traceparent.to_owned(),
            tracestate: text("tracestate").map(str::to_owned),
        })
    }
}

impl Caller {
    /// Whether this caller may see and use a conversation owned by `owner`.
    pub fn may_use(&self, owner: &str) -> bool {
        self.admin || self.owner == owner
    }
}

/// Checks `Authorization: Bearer <key>` when keys are configured.
pub(crate) async fn require_key(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Result<Response, AppError> {
    let keys = &state.inner.settings.api_keys;
    let caller = if keys.is_empty() {
        // No auth (loopback only): one shared identity.
        Caller {
            name: "anonymous".into(),
            owner: "anonymous".into(),
            admin: false,
            spend: state.inner.settings.key_spend(),
            trace: TraceHeaders::of(request.headers()),
        }
    } else {
        match key_for(request.headers(), keys) {
            Some(key) => Caller {
                name: key.name.clone(),
                owner: key.owner(),
                admin: key.admin,
                spend: key.spend.unwrap_or(state.inner.settings.key_spend()),
                trace: TraceHeaders::of(request.headers()),
            },
            None => return Err(AppError::Unauthorized),
        }
    };
    request.extensions_mut().insert(caller);
    Ok(next.run(request).await)
}
