//! `[mcp.oauth]`: how buddy authorizes itself to an HTTP MCP server that asks for it.

use serde::Deserialize;

/// OAuth 2.1 settings of one HTTP server. With none, buddy still authorizes when the
/// server answers 401: it finds the authorization server from the server's metadata
/// and registers itself there (dynamic registration) or names its metadata document.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// `false`: never authorize; a 401 is an error (use `headers` for a static token).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// A client id registered with the authorization server beforehand.
    #[serde(default)]
    pub client_id: Option<String>,
    /// The environment variable holding that client's secret, if it has one.
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// That client's secret given by the program embedding buddy (not a buddy.toml key:
    /// secrets stay out of it).
    #[serde(skip)]
    pub client_secret: Option<String>,
    /// An HTTPS URL of a client metadata document buddy is known by (a URL client id),
    /// used when the authorization server supports them.
    #[serde(default)]
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for; empty: those the server's challenge or metadata name.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The loopback port the browser is sent back to; default: any free port (an
    /// authorization server that pins the redirect URI needs a fixed one).
    #[serde(default)]
    pub redirect_port: Option<u16>,
    /// Seconds to wait for the person to finish in the browser.
    #[serde(default = "default_wait_secs")]
    pub wait_secs: f64,
}

fn yes() -> bool {
    true
}

fn default_wait_secs() -> f64 {
    300.0
}

impl Default for OAuthConfig {
    fn default() -> Self {
        OAuthConfig {
            enabled: true,
            client_id: None,
            client_secret_env: None,
            client_secret: None,
            client_metadata_url: None,
            scopes: Vec::new(),
            redirect_port: None,
            wait_secs: default_wait_secs(),
        }
    }
}

impl OAuthConfig {
    /// The pre-registered client's secret: given, or read from `client_secret_env`.
    pub fn client_secret(&self) -> Result<Option<String>, String> {
        if let Some(secret) = &self.client_secret {
            return Ok(Some(secret.clone()));
        }
        match &self.client_secret_env {
            None => Ok(None),
            Some(var) => std::env::var(var).map(Some).map_err(|_| {
                format!("the OAuth client secret comes from ${var}, which is not set")
            }),
        }
    }
}
