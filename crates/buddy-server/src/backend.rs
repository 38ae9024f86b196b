//! Where turns get their model and tools: the server knows this trait, the CLI (which
//! reads buddy.toml) implements it.

use std::sync::Arc;

use buddy_core::{Provider, Toolbox};
use buddy_engine::PolicyPatch;

/// What a request's `provider` / `model` resolve to.
#[derive(Clone)]
pub struct Resolved {
    pub provider: Arc<dyn Provider>,
    /// The tools of this turn (fresh per turn where they keep state, like scripted stubs).
    pub toolbox: Arc<dyn Toolbox>,
    /// The model name sent to the provider.
    pub model: String,
    /// Policy the backend applies before the request's own (a scenario's policy).
    pub policy: PolicyPatch,
    /// A system prompt for new conversations.
    pub system: Option<String>,
    /// The clock buddy's own waits run on: a scripted scenario's simulated one, or
    /// `None` for real time.
    pub clock: Option<Arc<dyn buddy_core::WaitClock>>,
}

impl Resolved {
    /// `provider`, `toolbox` and `model`, with no policy of the backend's, no system
    /// prompt and real time.
    pub fn new(
        provider: Arc<dyn Provider>,
        toolbox: Arc<dyn Toolbox>,
        model: impl Into<String>,
    ) -> Self {
        Resolved {
            provider,
            toolbox,
            model: model.into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        }
    }
}

/// A request named a provider or model the server does not have.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct BackendError(pub String);

/// Resolves models for turns and lists what clients may ask for.
pub trait Backend: Send + Sync {
    /// The models a client may name (`GET /v1/models`).
    fn models(&self) -> Vec<String>;
    /// The provider, tools and model for a request.
    fn resolve(
        &self,
        provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<Resolved, BackendError>;
    /// The MCP servers whose tools the turns are offered, for `GET /v1/health`.
    fn mcp_servers(&self) -> Vec<std::sync::Arc<buddy_mcp::McpSource>> {
        Vec::new()
    }
}
