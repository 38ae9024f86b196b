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
}
