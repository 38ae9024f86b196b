//! Sub-agents a request declares (`"agents": [...]` on `/v1/chat` and its resume), offered
//! beside the server's tools and its operator's `[[agents]]`: each declaration is checked
//! like buddy.toml's, its policy may only lower the operator's, and a bad one is a 400
//! naming `agents[i]`.

use std::collections::HashMap;
use std::sync::Arc;

use buddy_core::{Keep, Provider, ToolTable, Toolbox};
use buddy_engine::{AgentSet, AgentSpec};
use serde_json::Value;

use super::turn_policy;
use crate::backend::Resolved;
use crate::error::AppError;
use crate::request::Client;

/// Most sub-agents one request may declare: each is a tool definition the model reads
/// on every call, and a tree bounded by the policy's spawns either way.
const MAX_REQUEST_AGENTS: usize = 8;

/// `resolved`'s toolbox with the request's `declared` agents beside its tools (and the
/// operator's agents it already offers); their model calls go to `resolved`'s provider,
/// or to the provider and model a declaration names.
pub(crate) fn with_request_agents(
    client: &Client,
    resolved: &Resolved,
    declared: Vec<Value>,
) -> Result<Arc<dyn Toolbox>, AppError> {
    if declared.is_empty() {
        return Ok(Arc::clone(&resolved.toolbox));
    }
    if declared.len() > MAX_REQUEST_AGENTS {
        return Err(AppError::BadRequest(format!(
            "`agents`: a request may declare at most {MAX_REQUEST_AGENTS} sub-agents, not {}",
            declared.len()
        )));
    }
    let inner = Arc::clone(&resolved.toolbox);
    let mut specs = Vec::with_capacity(declared.len());
    let mut providers: HashMap<String, Arc<dyn Provider>> = HashMap::new();
    for (i, value) in declared.into_iter().enumerate() {
        let bad = |why: String| AppError::BadRequest(format!("`agents[{i}]`: {why}"));
        let mut spec: AgentSpec = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
        spec.check().map_err(|e| bad(e.to_string()))?;
        if inner.specs().iter().any(|s| s.name == spec.name) {
            return Err(bad(format!(
                "`{}` is already a tool of this server (a skill, or an agent of its buddy.toml); \
                 give the agent another name",
                spec.name
            )));
        }
        turn_policy(&client.state, resolved, &spec.policy)
            .map_err(|e| bad(format!("`policy`: {e}")))?;
        // A named provider or model must be one the server has; the turn's own otherwise.
        if spec.provider.is_some() || spec.model.is_some() {
            let other = client
                .resolve(spec.provider.as_deref(), spec.model.as_deref())
                .map_err(|e| bad(e.to_string()))?;
            let key = spec
                .provider
                .clone()
                .unwrap_or_else(|| format!("model `{}`", other.model));
            spec.model = Some(other.model);
            spec.provider = Some(key.clone());
            providers.insert(key, other.provider);
        }
        specs.push(spec);
    }
    let skills_only = ToolTable::builder()
        .toolbox_keeping(Arc::clone(&inner), Keep::NotAgents)
        .build_first_wins();
    let set = AgentSet::new(
        specs,
        Arc::new(skills_only),
        Arc::clone(&resolved.provider),
        providers,
    )
    .map_err(|e| AppError::BadRequest(format!("`agents`: {e}")))?;
    Ok(set.attach(inner))
}
