//! A server's OAuth side: the token holder every connection to it shares, and the
//! authorization-code flow (PKCE, loopback redirect) that fills it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::transport::AuthClient;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, CredentialStore,
    InMemoryCredentialStore, OAuthState, StoredCredentials, WWWAuthenticateParams,
};

use super::browser::Browser;
use super::callback::Callback;
use super::settings::OAuthConfig;
use super::store::FileCredentialStore;

/// The name buddy registers itself under.
const CLIENT_NAME: &str = "buddy";

/// Authorizations one call may start (a step-up, then give up).
pub(crate) const AUTHORIZATIONS_PER_CALL: u32 = 1;

/// One credential store, shared by every manager made for the server.
#[derive(Clone)]
struct Shared(Arc<dyn CredentialStore>);

#[async_trait::async_trait]
impl CredentialStore for Shared {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.0.load().await
    }
    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.0.save(credentials).await
    }
    async fn clear(&self) -> Result<(), AuthError> {
        self.0.clear().await
    }
}

/// The OAuth side of one HTTP MCP server.
pub(crate) struct Authorization {
    server: String,
    url: String,
    config: OAuthConfig,
    store: Shared,
    /// Where the tokens are kept, when on disk.
    kept_at: Option<PathBuf>,
    /// The HTTP client with the current tokens, shared by reconnections.
    client: tokio::sync::Mutex<Option<AuthClient<reqwest::Client>>>,
    /// Who can send a person to the authorization page; none: unattended.
    browser: Mutex<Option<Arc<dyn Browser>>>,
    /// One authorization at a time: calls refused together send the person once.
    authorizing: tokio::sync::Mutex<()>,
    /// Authorizations finished, so a call that waited on another's knows it is done.
    finished: AtomicU64,
}

impl Authorization {
    /// The OAuth side of server `server` at `url`; tokens kept under `dir` when given,
    /// else for this process only.
    pub(crate) fn new(
        server: &str,
        url: &str,
        config: OAuthConfig,
        dir: Option<&std::path::Path>,
    ) -> Self {
        let (store, kept_at): (Arc<dyn CredentialStore>, _) = match dir {
            Some(dir) => {
                let file = FileCredentialStore::new(dir, server, url);
                let path = file.path().to_path_buf();
                (Arc::new(file), Some(path))
            }
            None => (Arc::new(InMemoryCredentialStore::new()), None),
        };
        Authorization {
            server: server.to_owned(),
            url: url.to_owned(),
            config,
            store: Shared(store),
            kept_at,
            client: tokio::sync::Mutex::new(None),
            browser: Mutex::new(None),
            authorizing: tokio::sync::Mutex::new(()),
            finished: AtomicU64::new(0),
        }
    }

    /// Lets `browser` send a person to authorize when the server asks.
    pub(crate) fn set_browser(&self, browser: Arc<dyn Browser>) {
        if let Ok(mut slot) = self.browser.lock() {
            *slot = Some(browser);
        }
    }

    /// Where the tokens are kept, when on disk.
    pub(crate) fn kept_at(&self) -> Option<&std::path::Path> {
        self.kept_at.as_deref()
    }

    /// Forgets the server's tokens (`buddy mcp logout`).
    pub(crate) async fn forget(&self) -> Result<(), String> {
        *self.client.lock().await = None;
        self.store.clear().await.map_err(|e| e.to_string())
    }

    /// The HTTP client for a connection: the one holding the current tokens, or a new
    /// one over `base` with the tokens kept from an earlier run (if any).
    pub(crate) async fn http_client(
        &self,
        base: &reqwest::Client,
    ) -> Result<AuthClient<reqwest::Client>, String> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref() {
            return Ok(client.clone());
        }
        let mut manager = self.manager().await?;
        // Kept tokens whose server cannot be reached now are tried again at the next
        // connection; the request goes out without them and a 401 asks anew.
        if let Err(e) = manager.initialize_from_store().await {
            tracing::debug!(server = %self.server, error = %e, "kept OAuth tokens not usable");
        }
        let client = AuthClient::new(base.clone(), manager);
        *slot = Some(client.clone());
        Ok(client)
    }

    async fn manager(&self) -> Result<AuthorizationManager, String> {
        // reqwest is built without a TLS crypto provider: ring's, unless one is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut manager = AuthorizationManager::new(self.url.as_str())
            .await
            .map_err(|e| format!("cannot prepare OAuth for {}: {e}", self.url))?;
        manager.set_credential_store(self.store.clone());
        Ok(manager)
    }

    /// The browser to send the person to, or why buddy cannot authorize here.
    fn browser(&self) -> Result<Arc<dyn Browser>, String> {
        if !self.config.enabled {
            return Err(format!(
                "MCP server `{}` asks for authorization and its `oauth.enabled` is false; give a token in `headers_env`, or enable OAuth",
                self.server
            ));
        }
        if let Some(browser) = self.browser.lock().ok().and_then(|b| b.clone()) {
            return Ok(browser);
        }
        Err(match &self.kept_at {
            Some(path) => format!(
                "MCP server `{}` asks for OAuth authorization and nobody is here to give it: run `buddy mcp login {}` at a terminal once (buddy keeps the token in {} and refreshes it)",
                self.server,
                self.server,
                path.display()
            ),
            None => format!(
                "MCP server `{}` asks for OAuth authorization and nobody is here to give it; pass its token in `headers` (Authorization: Bearer …)",
                self.server
            ),
        })
    }

    /// The scopes to ask for explicitly: the configured ones, and on a step-up those
    /// already granted with those the challenge names (asking for the new scope alone
    /// would lose the old ones). Empty: let the server's metadata and challenge choose.
    async fn scopes_to_ask(&self, challenge: Option<&str>) -> Vec<String> {
        let granted = match self.client.lock().await.as_ref() {
            Some(client) => client.auth_manager.lock().await.get_current_scopes().await,
            None => Vec::new(),
        };
        let challenged = challenge
            .zip(url::Url::parse(&self.url).ok())
            .and_then(|(header, base)| WWWAuthenticateParams::parse(header, &base).scope)
            .unwrap_or_default();
        if granted.is_empty() && self.config.scopes.is_empty() {
            return Vec::new();
        }
        let mut scopes: Vec<String> = Vec::new();
        let all = self.config.scopes.iter().cloned().chain(granted);
        for scope in all.chain(challenged.split_whitespace().map(str::to_owned)) {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        scopes
    }

    /// Runs the authorization-code flow, answering the server's `challenge` (its
    /// `WWW-Authenticate`: where its metadata is, which scopes it wants): finds the
    /// authorization server, registers buddy (pre-registered id, metadata URL, or
    /// dynamic registration), sends the person to its page, takes the code at the
    /// loopback redirect and trades it for tokens, which every later request carries.
    pub(crate) async fn authorize(
        &self,
        base: &reqwest::Client,
        challenge: Option<&str>,
    ) -> Result<(), String> {
        let browser = self.browser()?;
        let before = self.finished.load(Ordering::SeqCst);
        let _one_at_a_time = self.authorizing.lock().await;
        if self.finished.load(Ordering::SeqCst) != before {
            // Another call authorized while this one waited: its token is the answer.
            return Ok(());
        }
        let failed = |e: AuthError| {
            format!(
                "OAuth authorization for MCP server `{}` failed: {e}",
                self.server
            )
        };
        let callback = Callback::bind(self.config.redirect_port).await?;
        let mut request =
            AuthorizationRequest::new(callback.redirect_uri()).with_client_name(CLIENT_NAME);
        if let Some(challenge) = challenge {
            request = request.with_challenge(challenge);
        }
        if let Some(id) = &self.config.client_id {
            request = request.with_preregistered_client(id);
            if let Some(secret) = self.config.client_secret()? {
                request = request.with_client_secret(secret);
            }
        }
        if let Some(url) = &self.config.client_metadata_url {
            request = request.with_client_metadata_url(url);
        }
        let scopes = self.scopes_to_ask(challenge).await;
        if !scopes.is_empty() {
            request = request.with_scopes(scopes);
        }
        let mut state = OAuthState::Unauthorized(self.manager().await?);
        state.start_authorization(request).await.map_err(failed)?;
        let page = state.get_authorization_url().await.map_err(failed)?;
        let wait = Duration::from_secs_f64(self.config.wait_secs.max(1.0));
        let waiting = callback.wait(wait);
        tokio::pin!(waiting);
        let came_back = tokio::select! {
            back = &mut waiting => back,
            opened = browser.open(&self.server, &page) => match opened {
                Ok(()) => waiting.await,
                Err(e) => Err(e),
            },
        }
        .map_err(|e| {
            format!(
                "OAuth authorization for MCP server `{}` failed: {e}",
                self.server
            )
        })?;
        state
            .handle_callback_url(&came_back)
            .await
            .map_err(failed)?;
        let manager = state.into_authorization_manager().ok_or_else(|| {
            format!(
                "OAuth authorization for MCP server `{}` did not finish",
                self.server
            )
        })?;
        *self.client.lock().await = Some(AuthClient::new(base.clone(), manager));
        self.finished.fetch_add(1, Ordering::SeqCst);
        tracing::debug!(server = %self.server, "OAuth authorization done");
        Ok(())
    }
}
