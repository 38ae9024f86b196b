//! The [`Endpoint`]: where a provider sends its requests, with retries and backoff.

use std::time::Duration;

use buddy_core::{ProviderError, Token, TokenStream};
use bytes::Bytes;

use super::body::BodyState;
use super::read::{
    BodyEnd, ERROR_BODY_BYTES, HEAD_BYTES, error_chain, http_error_message, jitter, json_exact,
    read_capped, read_up_to,
};
use super::target::Endpoint;
use super::{EventParser, Trace, secs};
use crate::watchdog::Watchdog;

impl Endpoint {
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
        for (name, value) in trace.client_headers {
            request = request.header(name.as_str(), value.as_str());
        }
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
