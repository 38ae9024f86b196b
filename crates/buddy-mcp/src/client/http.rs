//! Reaching a Streamable HTTP server: its HTTP client (buddy's user agent, no
//! redirects) and its transport with the entry's headers.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{AuthClient, StreamableHttpClientTransport};

use tokio::sync::watch;

use super::stream_watch::StreamWatch;
use crate::config::server::McpServerConfig;

/// Largest SSE event accepted from an HTTP server (a tool result, a tool list).
const MAX_SSE_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// The HTTP client for an HTTP server: buddy's user agent, no redirects.
pub(crate) fn http_client(config: &McpServerConfig) -> Result<reqwest::Client, String> {
    // reqwest is built without a TLS crypto provider: ring's, unless one is installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .user_agent(buddy_core::USER_AGENT)
        .connect_timeout(Duration::from_secs_f64(config.startup_timeout_secs))
        // A redirect could carry the server's headers (its token) to another host.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// The HTTP client a transport speaks through: the OAuth side over reqwest, watched for
/// its event stream's opening.
pub(crate) type WatchedClient = StreamWatch<AuthClient<reqwest::Client>>;

/// The Streamable HTTP transport for `url`, with the entry's headers; `client` adds
/// the server's OAuth token, when it has one. The receiver turns `true` once the
/// session's event stream has been opened (or refused).
pub(crate) fn http_transport(
    config: &McpServerConfig,
    url: &str,
    client: AuthClient<reqwest::Client>,
) -> Result<
    (
        StreamableHttpClientTransport<WatchedClient>,
        watch::Receiver<bool>,
    ),
    String,
> {
    let mut headers = HashMap::new();
    let from_env = config.headers_env.iter().map(|(header, var)| {
        std::env::var(var)
            .map(|value| (header, value))
            .map_err(|_| format!("header `{header}` comes from ${var}, which is not set"))
    });
    let literal = config.headers.iter().map(|(h, v)| Ok((h, v.clone())));
    for entry in literal.chain(from_env) {
        let (header, value) = entry?;
        let name = HeaderName::from_bytes(header.as_bytes())
            .map_err(|e| format!("header name `{header}` is not valid: {e}"))?;
        let value = HeaderValue::from_str(&value)
            .map_err(|e| format!("the value of header `{header}` is not valid: {e}"))?;
        headers.insert(name, value);
    }
    let transport_config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(headers)
        .max_sse_event_size(MAX_SSE_EVENT_BYTES);
    let (client, stream_settled) = StreamWatch::new(client);
    Ok((
        StreamableHttpClientTransport::with_client(client, transport_config),
        stream_settled,
    ))
}
