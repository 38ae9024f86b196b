//! An HTTP server's OAuth side: authorizing when it asks, `buddy mcp login` and
//! `logout`.

use std::sync::Arc;

use super::{McpError, McpSource, ServerState};
use crate::auth::Browser;
use crate::client::http::http_client;

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
