//! What the HTTP providers share: one client builder, timeouts, retries with backoff,
//! and the pipeline that turns a response body into tokens.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Once;
use std::time::{Duration, SystemTime};

use buddy_core::{CompletionRequest, ProviderError, Token, TokenStream};
use bytes::Bytes;
use futures::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use crate::sse::{SseDecoder, SseEvent};
use crate::watchdog::{Keeper, Watchdog};

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

/// Where a provider sends its requests, and how; shared, so each call's body reader holds
/// The W3C trace context a model call sends: `traceparent`, and `tracestate` beside it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Trace<'a> {
    pub parent: Option<&'a str>,
    pub state: Option<&'a str>,
}

impl<'a> Trace<'a> {
    /// The trace context `request` carries.
    pub(crate) fn of(request: &CompletionRequest<'a>) -> Self {
        Trace {
            parent: request.traceparent,
            state: request.tracestate,
        }
    }
}

/// it without copying it.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    parts: std::sync::Arc<EndpointParts>,
}

impl std::ops::Deref for Endpoint {
    type Target = EndpointParts;
    fn deref(&self) -> &EndpointParts {
        &self.parts
    }
}

/// What an [`Endpoint`] holds.
#[derive(Debug)]
pub(crate) struct EndpointParts {
    pub provider: String,
    pub url: String,
    pub client: reqwest::Client,
    pub settings: HttpSettings,
    /// `url`, parsed once rather than on every call.
    parsed_url: reqwest::Url,
    /// The headers every request carries (content type, key, configured extras), checked
    /// once; a key is marked sensitive so no debug output shows it.
    headers: HeaderMap,
    /// Keeps arming a call's watchdog from waking a parked thread.
    keeper: Keeper,
}

impl Endpoint {
    /// An endpoint for `url` with `headers`; a URL or header that cannot be sent is a
    /// configuration error now, not a failure of every call later.
    pub(crate) fn new(
        provider: String,
        given_url: String,
        client: reqwest::Client,
        headers: BTreeMap<String, String>,
        settings: HttpSettings,
    ) -> Result<Self, ProviderError> {
        let config = |message: String| ProviderError::Config {
            provider: provider.clone(),
            message,
        };
        // Requests go to the URL as given; everything shown (errors, logs, spans) gets
        // it without credentials.
        let url = crate::redact_url(&given_url);
        let parsed_url = reqwest::Url::parse(&given_url).map_err(|e| {
            config(format!(
                "`{url}` is not a URL buddy can call ({e}); check base_url"
            ))
        })?;
        let mut map = HeaderMap::new();
        map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in &headers {
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                config(format!(
                    "header name `{name}` is not valid; header names are letters, digits and -"
                ))
            })?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                config(format!(
                    "the value of header `{name}` is not valid; values are printable text on one line"
                ))
            })?;
            if matches!(header.as_str(), "authorization" | "x-api-key" | "api-key") {
                value.set_sensitive(true);
            }
            map.insert(header, value);
        }
        Ok(Endpoint {
            parts: std::sync::Arc::new(EndpointParts {
                provider,
                url,
                client,
                keeper: Keeper::new(
                    secs(settings.first_byte_timeout_secs),
                    secs(settings.idle_timeout_secs),
                    secs(settings.call_timeout_secs),
                ),
                settings,
                parsed_url,
                headers: map,
            }),
        })
    }

    fn timeout(&self, phase: &str, after: Duration) -> ProviderError {
        ProviderError::Timeout {
            provider: self.provider.clone(),
            url: self.url.clone(),
            phase: phase.to_owned(),
            after,
        }
    }

    /// A reply that hit one of the call's bounds.
    fn bound(&self, what: &str, setting: &str, value: impl std::fmt::Display) -> ProviderError {
        ProviderError::Stream {
            provider: self.provider.clone(),
            url: self.url.clone(),
            message: format!(
                "{what} ({setting} = {value}); the call was ended. Raise [providers.{}.http] {setting} if the server is right",
                self.provider
            ),
            retryable: false,
        }
    }

    fn stream_error(&self, message: String) -> ProviderError {
        ProviderError::Stream {
            provider: self.provider.clone(),
            url: self.url.clone(),
            message,
            retryable: false,
        }
    }

    /// Sends `body` once and checks the status; an HTTP error comes back typed. The body
    /// is shared between attempts, never copied. The call's timer comes back with the
    /// response, for reading its body.
    async fn send(
        &self,
        body: &Bytes,
        trace: Trace<'_>,
    ) -> Result<(reqwest::Response, Watchdog), ProviderError> {
        let mut request = self
            .client
            .post(self.parsed_url.clone())
            .headers(self.headers.clone())
            .body(body.clone());
        if let Some(traceparent) = trace.parent {
            request = request.header("traceparent", traceparent);
            if let Some(tracestate) = trace.state {
                request = request.header("tracestate", tracestate);
            }
        }
        let first_byte = secs(self.settings.first_byte_timeout_secs);
        let idle = secs(self.settings.idle_timeout_secs);
        let first_byte_by = tokio::time::Instant::now() + first_byte;
        self.keeper.ensure();
        let mut watchdog = Watchdog::start(first_byte, idle, secs(self.settings.call_timeout_secs));
        let mut sending = request.send();
        let sent = loop {
            if let Some(sent) = watchdog.race(&mut sending).await {
                break sent;
            }
            let now = tokio::time::Instant::now();
            if now >= first_byte_by {
                return Err(self.timeout("response", first_byte));
            }
            // Headers still due: wait on, but never past where the idle limit of a body
            // that starts now would fall.
            watchdog.rearm(first_byte_by.min(now + idle));
        };
        let response = match sent {
            Err(e) => {
                return Err(ProviderError::Connect {
                    provider: self.provider.clone(),
                    url: self.url.clone(),
                    message: error_chain(&e),
                });
            }
            Ok(response) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok((response, watchdog));
        }
        let location = status
            .is_redirection()
            .then(|| {
                response
                    .headers()
                    .get("location")
                    .and_then(|v| v.to_str().ok())
            })
            .flatten()
            .map(str::to_owned);
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .and_then(|s| Duration::try_from_secs_f64(s).ok());
        let text = tokio::time::timeout(first_byte, read_capped(response, ERROR_BODY_BYTES))
            .await
            .unwrap_or_default();
        Err(ProviderError::Http {
            provider: self.provider.clone(),
            url: self.url.clone(),
            status: status.as_u16(),
            message: match location {
                Some(to) => format!(
                    "the model server redirects to {to}; buddy does not follow redirects (they could carry the API key elsewhere): set base_url to the address that answers"
                ),
                None if status.is_redirection() => "the model server answered with a redirect, which buddy does not follow: set base_url to the address that answers".to_owned(),
                None => http_error_message(status.as_u16(), &text),
            },
            retry_after,
        })
    }

    /// Sends `body` and returns its token stream. Failures before the first token are
    /// retried with backoff when retrying is safe; once a token exists, never.
    pub(crate) async fn stream<P: EventParser>(
        &self,
        body: Bytes,
        trace: Trace<'_>,
        make_parser: impl Fn() -> P,
    ) -> Result<TokenStream, ProviderError> {
        let mut attempt = 0;
        loop {
            let result = async {
                let (response, watchdog) = self.send(&body, trace).await?;
                let mut state = BodyState::new(self, response, watchdog, make_parser());
                // Pull until the first token of the reply so errors before it can still be
                // retried; the server's id and model of the reply are not part of it
                // (Anthropic's `message_start`, then an `overloaded_error`, is retried).
                let mut pulled = Vec::new();
                let outcome = loop {
                    match state.next_token().await {
                        Some(Ok(token @ Token::Response(_))) => pulled.push(token),
                        Some(Ok(token)) => {
                            pulled.push(token);
                            break Ok(());
                        }
                        Some(Err(e)) => break Err(e),
                        None => break Ok(()),
                    }
                };
                outcome?;
                for token in pulled.into_iter().rev() {
                    state.pending.push_front(token);
                }
                Ok::<_, ProviderError>(state)
            }
            .await;
            match result {
                Ok(state) => return Ok(state.into_stream()),
                Err(e) if e.is_retryable() && attempt < self.settings.max_retries => {
                    let Some(wait) = self.backoff(attempt, &e) else {
                        return Err(e);
                    };
                    tracing::warn!(provider = %self.provider, url = %self.url, attempt = attempt + 1, wait_ms = wait.as_millis() as u64, error = %e, "retrying model call");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One model call: encodes `body`, then streams it through a parser from
    /// `make_parser`, or (non-streaming) parses the whole response with `parse_whole`.
    /// Either way the caller gets the same tokens. `trace` goes out as its headers.
    pub(crate) async fn call<P: EventParser>(
        &self,
        body: &impl serde::Serialize,
        stream: bool,
        trace: Trace<'_>,
        make_parser: impl Fn() -> P,
        parse_whole: fn(&str, &str, &str) -> Result<Vec<Token>, ProviderError>,
    ) -> Result<TokenStream, ProviderError> {
        let body = json_exact(body).map_err(|e| ProviderError::Config {
            provider: self.provider.clone(),
            message: format!("cannot encode the request: {e}"),
        })?;
        self.call_exact(body, stream, trace, make_parser, parse_whole)
            .await
    }

    /// [`call`](Self::call) with a body already encoded: sent exactly as it is.
    pub(crate) async fn call_exact<P: EventParser>(
        &self,
        body: Bytes,
        stream: bool,
        trace: Trace<'_>,
        make_parser: impl Fn() -> P,
        parse_whole: fn(&str, &str, &str) -> Result<Vec<Token>, ProviderError>,
    ) -> Result<TokenStream, ProviderError> {
        if stream {
            return self.stream(body, trace, make_parser).await;
        }
        let text = self.request_json(body, trace).await?;
        let tokens = parse_whole(&self.provider, &self.url, &text)?;
        Ok(Box::pin(futures::stream::iter(tokens.into_iter().map(Ok))) as TokenStream)
    }

    /// Sends `body` (non-streaming) and returns the whole response text, with the same retries.
    pub(crate) async fn request_json(
        &self,
        body: Bytes,
        trace: Trace<'_>,
    ) -> Result<String, ProviderError> {
        let mut attempt = 0;
        loop {
            let result = async {
                let (response, _) = self.send(&body, trace).await?;
                let limit = secs(self.settings.call_timeout_secs);
                tokio::time::timeout(limit, self.read_body(response))
                    .await
                    .map_err(|_| self.timeout("whole response body", limit))?
            }
            .await;
            match result {
                Ok(text) => return Ok(text),
                Err(e) if e.is_retryable() && attempt < self.settings.max_retries => {
                    let Some(wait) = self.backoff(attempt, &e) else {
                        return Err(e);
                    };
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A non-streamed body, read up to `max_body_bytes`.
    async fn read_body(&self, response: reqwest::Response) -> Result<String, ProviderError> {
        let max = self.settings.max_body_bytes;
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("(none)")
            .to_owned();
        let bytes = match read_up_to(response, max).await {
            (bytes, BodyEnd::Complete) => bytes,
            (_, BodyEnd::OverCap) => {
                return Err(self.bound(
                    "the response body is larger than the limit",
                    "max_body_bytes",
                    max,
                ));
            }
            (_, BodyEnd::Broken(e)) => {
                return Err(self.stream_error(format!(
                    "the response body could not be read: {}",
                    error_chain(&e)
                )));
            }
        };
        if content_type.to_ascii_lowercase().contains("html") {
            let head = String::from_utf8_lossy(&bytes[..bytes.len().min(HEAD_BYTES)]).into_owned();
            return Err(ProviderError::Malformed {
                provider: self.provider.clone(),
                url: self.url.clone(),
                message: format!(
                    "HTTP 200 with content-type `{content_type}` and a body beginning {:?}, not a JSON \
                     response; check base_url (a proxy or gateway may be answering)",
                    head.trim()
                ),
            });
        }
        String::from_utf8(bytes)
            .map_err(|_| self.stream_error("the response body is not valid UTF-8".to_owned()))
    }

    /// How long to wait before retry `attempt + 1`; `None` when the server asks for longer than allowed.
    fn backoff(&self, attempt: u32, error: &ProviderError) -> Option<Duration> {
        let max = Duration::from_millis(self.settings.retry_max_ms);
        if let ProviderError::Http {
            retry_after: Some(after),
            ..
        } = error
        {
            return (*after <= max).then_some(*after);
        }
        let ceiling = Duration::from_millis(
            self.settings
                .retry_base_ms
                .saturating_mul(1 << attempt.min(20)),
        )
        .min(max);
        Some(ceiling.mul_f64(jitter()))
    }
}

/// Most characters of a server's error message quoted in ours.
const ERROR_MESSAGE_CHARS: usize = 600;

/// Most bytes of an error body kept for the message.
const ERROR_BODY_BYTES: usize = 16 * 1024;

/// An error body as text, up to `cap` bytes.
async fn read_capped(response: reqwest::Response, cap: usize) -> String {
    // A broken or overlong error body still gives what arrived of it.
    let (bytes, _) = read_up_to(response, cap).await;
    String::from_utf8_lossy(&bytes).into_owned()
}

/// How reading a body up to a cap ended.
enum BodyEnd {
    Complete,
    /// More than the cap arrived; the bytes kept are the first `cap`.
    OverCap,
    Broken(reqwest::Error),
}

/// Reads a response body, keeping at most `cap` bytes and reading no further past them.
async fn read_up_to(response: reqwest::Response, cap: usize) -> (Vec<u8>, BodyEnd) {
    let mut body = response.bytes_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        match chunk {
            Err(e) => return (bytes, BodyEnd::Broken(e)),
            Ok(chunk) if bytes.len() + chunk.len() > cap => {
                let room = cap - bytes.len();
                bytes.extend_from_slice(&chunk[..room]);
                return (bytes, BodyEnd::OverCap);
            }
            Ok(chunk) => bytes.extend_from_slice(&chunk),
        }
    }
    (bytes, BodyEnd::Complete)
}

/// `value` as JSON in a buffer of exactly its length: a request that carries megabytes of
/// tool-call arguments costs its size once.
fn json_exact(value: &impl serde::Serialize) -> Result<Bytes, serde_json::Error> {
    buddy_core::json_exact(value, 0).map(Bytes::from)
}

/// The message of an HTTP error: the API's own `error.message` when the body has one.
fn http_error_message(status: u16, body: &str) -> String {
    let from_json = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            let error = v.get("error")?;
            error
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_owned)
                .or_else(|| error.as_str().map(str::to_owned))
        });
    let detail = from_json.unwrap_or_else(|| body.trim().to_owned());
    let detail = match detail.char_indices().nth(ERROR_MESSAGE_CHARS) {
        _ if detail.is_empty() => "(empty body)".to_owned(),
        Some((cut, _)) => format!("{}…", &detail[..cut]),
        None => detail,
    };
    let hint = match status {
        401 | 403 => "; check the API key (api_key_env in buddy.toml)",
        404 => "; check base_url and the model name",
        429 => "; rate limited",
        _ => "",
    };
    format!("{detail}{hint}")
}

/// A reqwest error with its causes, which carry the useful part ("connection refused");
/// the URL it names is shown without credentials.
fn error_chain(error: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    match error.url() {
        Some(url) => text.replace(url.as_str(), &crate::redact_url(url.as_str())),
        None => text,
    }
}

/// A factor in [0.5, 1.0): "equal jitter", so retries of many clients spread out.
fn jitter() -> f64 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut x = u64::from(nanos) | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    0.5 + (x % 1000) as f64 / 2000.0
}

/// A streamed body on its way to becoming tokens.
struct BodyState<P> {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    decoder: SseDecoder,
    parser: P,
    events: Vec<SseEvent>,
    pending: VecDeque<Token>,
    /// An error to deliver after the tokens that came before it.
    error: Option<ProviderError>,
    finished: bool,
    first_byte: Duration,
    idle: Duration,
    got_bytes: bool,
    /// When reading the body began: the first chunk is due `first_byte` after it.
    body_from: tokio::time::Instant,
    /// The call's one timer, checked against the limits when it fires.
    watchdog: Watchdog,
    endpoint: Endpoint,
    /// The response's content type, quoted when the body is not an event stream.
    content_type: String,
    /// The content type says HTML: a proxy's or gateway's page, never a model's stream.
    html: bool,
    /// The first bytes of the body, quoted when it holds no events.
    head: Vec<u8>,
    saw_event: bool,
    /// When the whole call must be over (`call_timeout_secs`).
    ends_by: tokio::time::Instant,
    /// Event data bytes received so far (`max_reply_bytes`).
    reply_bytes: usize,
    /// When the body last brought something other than keep-alives (comments, empty
    /// events, pings): the idle timeout counts from here, so a server that only keeps
    /// the connection open is cut off too.
    progress_at: tokio::time::Instant,
    /// Whether the chunk being handled completed an event that is not a keep-alive.
    brought_content: bool,
}

/// Bytes of a body quoted when it is not what the wire format promises.
const HEAD_BYTES: usize = 200;

impl<P: EventParser> BodyState<P> {
    fn new(
        endpoint: &Endpoint,
        response: reqwest::Response,
        watchdog: Watchdog,
        parser: P,
    ) -> Self {
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("(none)")
            .to_owned();
        let html = content_type.to_ascii_lowercase().contains("html");
        let now = tokio::time::Instant::now();
        BodyState {
            html,
            ends_by: now + secs(endpoint.settings.call_timeout_secs),
            reply_bytes: 0,
            progress_at: now,
            body_from: now,
            watchdog,
            brought_content: false,
            content_type,
            head: Vec::new(),
            saw_event: false,
            body: Box::pin(response.bytes_stream()),
            decoder: SseDecoder::bounded(
                crate::sse::DEFAULT_MAX_LINE_BYTES.min(endpoint.settings.max_event_bytes),
                endpoint.settings.max_event_bytes,
            ),
            parser,
            events: Vec::new(),
            pending: VecDeque::new(),
            error: None,
            finished: false,
            first_byte: secs(endpoint.settings.first_byte_timeout_secs),
            idle: secs(endpoint.settings.idle_timeout_secs),
            got_bytes: false,
            endpoint: endpoint.clone(),
        }
    }

    /// The next token; tokens that arrived before an error come first, then the error,
    /// then `None`.
    async fn next_token(&mut self) -> Option<Result<Token, ProviderError>> {
        loop {
            if let Some(token) = self.pending.pop_front() {
                return Some(Ok(token));
            }
            if let Some(error) = self.error.take() {
                return Some(Err(error));
            }
            if self.finished {
                return None;
            }
            // The next chunk is due by the first limit to fall; the timer is never later.
            let due = if self.got_bytes {
                self.progress_at + self.idle
            } else {
                self.body_from + self.first_byte
            };
            let result = match self.watchdog.race(&mut self.body.next()).await {
                None => {
                    let now = tokio::time::Instant::now();
                    if now < due.min(self.ends_by) {
                        // Early: wait on (before any bytes, never past where the idle
                        // limit would fall if they arrived now).
                        let at = if self.got_bytes {
                            due
                        } else {
                            due.min(now + self.idle)
                        };
                        self.watchdog.rearm(at.min(self.ends_by));
                        continue;
                    }
                    Err(self.limit_reached(due))
                }
                Some(Some(Ok(bytes))) => {
                    let before = self.decoder.pending_bytes();
                    self.brought_content = false;
                    let fed = self.feed(&bytes);
                    let pending = self.decoder.pending_bytes();
                    let growing = pending > KEEP_ALIVE_BYTES && pending > before;
                    if !self.got_bytes || self.brought_content || growing {
                        self.progress_at = tokio::time::Instant::now();
                    }
                    self.got_bytes = true;
                    fed
                }
                Some(Some(Err(e))) => Err(self.endpoint.stream_error(format!(
                    "the connection broke before the response was complete: {}",
                    error_chain(&e)
                ))),
                Some(None) => self.end_of_body(),
            };
            if let Err(e) = result {
                self.finished = true;
                self.error = Some(e);
            }
        }
    }

    /// The error for a timer that fired at or past `due` or the call's end.
    fn limit_reached(&self, due: tokio::time::Instant) -> ProviderError {
        if self.ends_by <= due {
            self.endpoint.bound(
                "the reply was still coming when the call's time ran out",
                "call_timeout_secs",
                self.endpoint.settings.call_timeout_secs,
            )
        } else if self.got_bytes {
            self.endpoint.timeout("next chunk", self.idle)
        } else {
            self.endpoint.timeout("first chunk", self.first_byte)
        }
    }

    fn feed(&mut self, bytes: &[u8]) -> Result<(), ProviderError> {
        if self.head.len() < HEAD_BYTES {
            let room = HEAD_BYTES - self.head.len();
            self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        if self.html {
            return Err(self.not_a_stream());
        }
        self.decoder
            .push(bytes, &mut self.events)
            .map_err(|e| self.endpoint.stream_error(e.to_string()))?;
        self.drain_events()
    }

    /// Hands decoded events to the parser; its end marker completes the stream.
    fn drain_events(&mut self) -> Result<(), ProviderError> {
        let events = std::mem::take(&mut self.events);
        self.saw_event |= !events.is_empty();
        self.reply_bytes += events.iter().map(|e| e.data.len()).sum::<usize>();
        if self.reply_bytes > self.endpoint.settings.max_reply_bytes {
            return Err(self.endpoint.bound(
                "the reply is larger than the limit",
                "max_reply_bytes",
                self.endpoint.settings.max_reply_bytes,
            ));
        }
        for event in &events {
            self.brought_content |= !self.parser.is_keep_alive(event);
            if self.parser.on_event(event, &mut self.pending)? {
                return self.complete();
            }
        }
        // Keep the allocation for the next chunk.
        self.events = events;
        self.events.clear();
        Ok(())
    }

    fn end_of_body(&mut self) -> Result<(), ProviderError> {
        self.decoder
            .finish(&mut self.events)
            .map_err(|e| self.endpoint.stream_error(e.to_string()))?;
        self.drain_events()?;
        if !self.saw_event {
            return Err(self.not_a_stream());
        }
        if self.finished {
            Ok(())
        } else {
            self.complete()
        }
    }

    /// A successful status whose body is not a stream of server-sent events.
    fn not_a_stream(&self) -> ProviderError {
        let head = String::from_utf8_lossy(&self.head);
        let shown = if head.trim().is_empty() {
            "an empty body".to_owned()
        } else {
            format!("a body beginning {:?}", head.trim())
        };
        ProviderError::Malformed {
            provider: self.endpoint.provider.clone(),
            url: self.endpoint.url.clone(),
            message: format!(
                "HTTP 200 with content-type `{}` and {shown}, not a stream of server-sent events; \
                 check base_url (a proxy or gateway may be answering), or set `stream = false` for a server that cannot stream",
                self.content_type
            ),
        }
    }

    fn complete(&mut self) -> Result<(), ProviderError> {
        self.finished = true;
        self.parser.on_end(&mut self.pending)
    }

    fn into_stream(self) -> TokenStream {
        Box::pin(futures::stream::unfold(self, |mut state| async move {
            let token = state.next_token().await?;
            Some((token, state))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(url: &str, headers: &[(&str, &str)]) -> Result<Endpoint, ProviderError> {
        let settings = HttpSettings::default();
        let client = build_client("p", &settings)?;
        let headers = headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect();
        Endpoint::new("p".to_owned(), url.to_owned(), client, headers, settings)
    }

    fn config_message(result: Result<Endpoint, ProviderError>) -> String {
        match result {
            Err(ProviderError::Config { message, .. }) => message,
            Err(other) => panic!("expected a configuration error, got {other}"),
            Ok(_) => panic!("expected a configuration error, got an endpoint"),
        }
    }

    #[test]
    fn headers_are_checked_once_and_keys_are_hidden() {
        let ok = endpoint(
            "http://127.0.0.1:9/v1/chat/completions",
            &[("Authorization", "Bearer sk-1"), ("X-Extra", "yes")],
        )
        .expect("a valid endpoint");
        assert_eq!(ok.headers["content-type"], "application/json");
        assert!(ok.headers["authorization"].is_sensitive());
        assert!(!ok.headers["x-extra"].is_sensitive());
        assert!(!format!("{:?}", ok.headers).contains("sk-1"));

        let name = config_message(endpoint("http://127.0.0.1:9/x", &[("bad name", "v")]));
        assert!(name.contains("header name `bad name`"), "{name}");
        let value = config_message(endpoint("http://127.0.0.1:9/x", &[("x-a", "line\nbreak")]));
        assert!(value.contains("header `x-a`"), "{value}");
        let url = config_message(endpoint("127.0.0.1:9/chat/completions", &[]));
        assert!(url.contains("check base_url"), "{url}");
    }
}
