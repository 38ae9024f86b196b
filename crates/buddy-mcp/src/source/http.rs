//! Reaching a Streamable HTTP server: its client and transport, and the OAuth side —
//! authorizing when it asks, `buddy mcp login` and `logout`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{AuthClient, StreamableHttpClientTransport};

use super::{McpError, McpSource, ServerState};
use crate::auth::Browser;
use crate::config::McpServerConfig;

/// Largest SSE event accepted from an HTTP server (a tool result, a tool list).
const MAX_SSE_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// The HTTP client for an HTTP server: buddy's user agent, no redirects.
pub(super) fn http_client(config: &McpServerConfig) -> Result<reqwest::Client, String> {
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

/// The Streamable HTTP transport for `url`, with the entry's headers; `client` adds
/// the server's OAuth token, when it has one.
pub(super) fn http_transport(
    config: &McpServerConfig,
    url: &str,
    client: AuthClient<reqwest::Client>,
) -> Result<StreamableHttpClientTransport<AuthClient<reqwest::Client>>, String> {
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
    Ok(StreamableHttpClientTransport::with_client(
        client,
        transport_config,
    ))
}

impl McpSource {
    /// Runs the OAuth flow for the server's `challenge`, or says why it cannot.
    pub(super) async fn authorize(&self, challenge: Option<&str>) -> Result<(), McpError> {
        let name = self.config.name.clone();
        let unauthorized = |message| McpError::Unauthorized {
            server: name.clone(),
            message,
        };
        let auth = self.auth.as_ref().ok_or_else(|| {
            unauthorized(format!(
                "MCP server `{name}` asks for authorization, which only HTTP servers can"
            ))
        })?;
        let base = http_client(&self.config).map_err(unauthorized)?;
        let authorized = auth.authorize(&base, challenge).await.map_err(unauthorized);
        if let Err(e) = &authorized {
            self.set_state(ServerState::Down(e.to_string()));
        }
        authorized
    }

    /// Lets `browser` send a person to authorize buddy when an HTTP server asks (a
    /// terminal); without one, such a server's error says to run `buddy mcp login`.
    pub fn set_browser(&self, browser: Arc<dyn Browser>) {
        if let Some(auth) = &self.auth {
            auth.set_browser(browser);
        }
    }

    /// `buddy mcp login`: connects, authorizing through the browser if the server asks;
    /// where the tokens are kept, if on disk.
    pub async fn login(&self) -> Result<Option<std::path::PathBuf>, McpError> {
        self.connected().await?;
        Ok(self
            .auth
            .as_ref()
            .and_then(|a| a.kept_at())
            .map(std::path::Path::to_path_buf))
    }

    /// `buddy mcp logout`: forgets the server's kept tokens.
    pub async fn logout(&self) -> Result<(), McpError> {
        self.disconnect().await;
        match &self.auth {
            Some(auth) => auth.forget().await.map_err(|message| McpError::Failed {
                server: self.config.name.clone(),
                message,
            }),
            None => Ok(()),
        }
    }
}
