//! Who a request comes from: its key's identity, quotas and trace context, as the
//! auth middleware puts it on the request for every endpoint.

use crate::settings::SpendCeiling;

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
    pub(crate) fn of(headers: &axum::http::HeaderMap) -> Option<Self> {
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
