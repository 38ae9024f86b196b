//! Reading whole bodies up to a cap, and the words of HTTP and connection errors.

use std::time::SystemTime;

use bytes::Bytes;
use futures::StreamExt;

/// Bytes of a body quoted when it is not what the wire format promises.
pub(super) const HEAD_BYTES: usize = 200;

/// Most characters of a server's error message quoted in ours.
const ERROR_MESSAGE_CHARS: usize = 600;

/// Most bytes of an error body kept for the message.
pub(super) const ERROR_BODY_BYTES: usize = 16 * 1024;

/// An error body as text, up to `cap` bytes.
pub(super) async fn read_capped(response: reqwest::Response, cap: usize) -> String {
    // A broken or overlong error body still gives what arrived of it.
    let (bytes, _) = read_up_to(response, cap).await;
    String::from_utf8_lossy(&bytes).into_owned()
}

/// How reading a body up to a cap ended.
pub(super) enum BodyEnd {
    Complete,
    /// More than the cap arrived; the bytes kept are the first `cap`.
    OverCap,
    Broken(reqwest::Error),
}

/// Reads a response body, keeping at most `cap` bytes and reading no further past them.
pub(super) async fn read_up_to(response: reqwest::Response, cap: usize) -> (Vec<u8>, BodyEnd) {
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
pub(super) fn json_exact(value: &impl serde::Serialize) -> Result<Bytes, serde_json::Error> {
    buddy_core::json_exact(value, 0).map(Bytes::from)
}

/// The message of an HTTP error: the API's own `error.message` when the body has one.
pub(super) fn http_error_message(status: u16, body: &str) -> String {
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
pub(super) fn error_chain(error: &reqwest::Error) -> String {
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
pub(super) fn jitter() -> f64 {
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
