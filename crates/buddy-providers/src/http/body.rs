//! The body pipeline: a streamed response on its way to becoming tokens.

use std::collections::VecDeque;
use std::time::Duration;

use buddy_core::{ProviderError, Token, TokenStream};
use futures::StreamExt;

use super::read::{HEAD_BYTES, error_chain};
use super::target::Endpoint;
use super::{EventParser, KEEP_ALIVE_BYTES, secs};
use crate::sse::{SseDecoder, SseEvent};
use crate::watchdog::Watchdog;

/// A streamed body on its way to becoming tokens.
pub(super) struct BodyState<P> {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    decoder: SseDecoder,
    parser: P,
    events: Vec<SseEvent>,
    pub(super) pending: VecDeque<Token>,
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
impl<P: EventParser> BodyState<P> {
    pub(super) fn new(
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
    pub(super) async fn next_token(&mut self) -> Option<Result<Token, ProviderError>> {
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

    pub(super) fn into_stream(self) -> TokenStream {
        Box::pin(futures::stream::unfold(self, |mut state| async move {
            let token = state.next_token().await?;
            Some((token, state))
        }))
    }
}
