//! What the HTTP providers share: one client builder, timeouts, retries with backoff,
//! and the pipeline that turns a response body into tokens.

mod body;
mod endpoint;
mod read;
mod target;

pub(crate) use target::Endpoint;

use std::collections::VecDeque;
use std::sync::Once;
use std::time::Duration;

use buddy_core::{CompletionRequest, ProviderError, Token};
use serde::{Deserialize, Serialize};

use crate::sse::SseEvent;

/// Timeouts and retries of one HTTP provider.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpSettings {
    /// Time to open the TCP/TLS connection.
    pub connect_timeout_secs: f64,
    /// Time until the response headers and the first body bytes arrive.
    pub first_byte_timeout_secs: f64,
    /// Longest silence between two chunks of a streamed body.
    pub idle_timeout_secs: f64,
    /// Retries of a request that failed before any token arrived (429, 5xx, connection).
    pub max_retries: u32,
    /// First backoff; it doubles each retry, with full jitter.
    pub retry_base_ms: u64,
    /// Longest wait before a retry; a `Retry-After` beyond it is not waited for.
    pub retry_max_ms: u64,
    /// Speak HTTP/2 to a plain-http server without negotiation, so concurrent calls share
    /// one connection (TLS servers negotiate HTTP/2 on their own).
    pub http2_prior_knowledge: bool,
    /// Wall-clock limit of one model call, from sending to the reply's end; keep-alive
    /// comments do not extend it.
    pub call_timeout_secs: f64,
    /// Bytes of event data in one streamed reply (text, arguments and their JSON framing).
    pub max_reply_bytes: usize,
    /// Bytes of one server-sent event.
    pub max_event_bytes: usize,
    /// Bytes of a non-streamed response body.
    pub max_body_bytes: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            connect_timeout_secs: 10.0,
            first_byte_timeout_secs: 120.0,
            idle_timeout_secs: 60.0,
            max_retries: 3,
            retry_base_ms: 500,
            retry_max_ms: 30_000,
            http2_prior_knowledge: false,
            call_timeout_secs: 600.0,
            max_reply_bytes: 16 * 1024 * 1024,
            max_event_bytes: 8 * 1024 * 1024,
            max_body_bytes: 16 * 1024 * 1024,
        }
    }
}

fn secs(value: f64) -> Duration {
    Duration::try_from_secs_f64(value).unwrap_or(Duration::from_secs(60))
}

static INSTALL_RING: Once = Once::new();

/// Installs rustls' ring provider for the process, once. reqwest (built with
/// `rustls-no-provider`) panics when a client is built without one.
pub fn install_crypto_provider() {
    INSTALL_RING.call_once(|| {
        // Another part of the process may have installed one already; either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// What buddy calls itself to model servers (their logs and rate limiters see it).
pub use buddy_core::USER_AGENT;

/// The one place a reqwest client is built.
pub(crate) fn build_client(
    provider: &str,
    settings: &HttpSettings,
) -> Result<reqwest::Client, ProviderError> {
    install_crypto_provider();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(secs(settings.connect_timeout_secs))
        .user_agent(USER_AGENT)
        // A redirect could carry the API key to another host: never followed.
        .redirect(reqwest::redirect::Policy::none());
    if settings.http2_prior_knowledge {
        builder = builder.http2_prior_knowledge();
    }
    builder.build().map_err(|e| ProviderError::Config {
        provider: provider.to_owned(),
        message: format!("cannot build the HTTP client: {e}"),
    })
}

/// Turns SSE events into tokens; one per request.
pub(crate) trait EventParser: Send + 'static {
    /// Handles one event. Returns `Ok(true)` when the stream is complete (`[DONE]`, `message_stop`).
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut VecDeque<Token>,
    ) -> Result<bool, ProviderError>;
    /// The body ended: emit what is left (calls, finish) or say why the stream is incomplete.
    fn on_end(&mut self, out: &mut VecDeque<Token>) -> Result<(), ProviderError>;
    /// Whether `event` only keeps the connection open (an empty event, a `ping`): such
    /// events do not restart the idle timeout.
    fn is_keep_alive(&self, event: &SseEvent) -> bool {
        event.data.trim().is_empty()
    }
}

/// Bytes an event under way may hold and still be a keep-alive in pieces; past this, a
/// partial event is progress (a large tool call arriving slowly).
const KEEP_ALIVE_BYTES: usize = 256;

/// What a model call sends beside its body: the W3C trace context (`traceparent`, and
/// `tracestate` beside it), and a client's own headers on a call passed through as it came.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Trace<'a> {
    pub parent: Option<&'a str>,
    pub state: Option<&'a str>,
    /// The client's headers (its `anthropic-beta`), added to the provider's own.
    pub client_headers: &'a [(String, String)],
}

impl<'a> Trace<'a> {
    /// The trace context `request` carries.
    pub(crate) fn of(request: &CompletionRequest<'a>) -> Self {
        Trace {
            parent: request.traceparent,
            state: request.tracestate,
            client_headers: &[],
        }
    }
}

#[cfg(test)]
mod tests;
