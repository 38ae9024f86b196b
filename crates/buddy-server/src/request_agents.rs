//! Sub-agents a request declares (`"agents": [...]` on `/v1/chat` and its resume), offered
//! beside the server's tools and its operator's `[[agents]]`: each declaration is checked
//! like buddy.toml's, its policy may only lower the operator's, and a bad one is a 400
//! naming `agents[i]`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use buddy_core::{BoxFuture, Provider, RepeatSemantics, SkillContext, ToolCall, ToolOutcome};
use buddy_core::{ToolSpec, Toolbox};
use buddy_engine::{AgentSet, AgentSpec};
use serde_json::Value;

use crate::backend::Resolved;
use crate::error::AppError;
use crate::request::Client;
use crate::turn::turn_policy;

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
    let names: HashSet<String> = specs.iter().map(|s| s.name.clone()).collect();
    let skills_only: Arc<dyn Toolbox> = Arc::new(SkillsOnly::new(Arc::clone(&inner)));
    let set = AgentSet::new(
        specs,
        skills_only,
        Arc::clone(&resolved.provider),
        providers,
    )
    .map_err(|e| AppError::BadRequest(format!("`agents`: {e}")))?;
    Ok(Arc::new(WithRequestAgents::new(
        inner,
        set.toolbox(),
        names,
    )))
}

/// A toolbox without its sub-agents: what a request's agents may be given as skills (an
/// operator's agent is started only by the turn it is offered to, never as a skill).
struct SkillsOnly {
    inner: Arc<dyn Toolbox>,
    specs: Vec<ToolSpec>,
}

impl SkillsOnly {
    fn new(inner: Arc<dyn Toolbox>) -> Self {
        let specs = inner
            .specs()
            .iter()
            .filter(|s| !inner.is_agent(&s.name))
            .cloned()
            .collect();
        SkillsOnly { inner, specs }
    }
}

impl Toolbox for SkillsOnly {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }
    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        if self.inner.is_agent(name) {
            return None;
        }
        self.inner.semantics(name)
    }
    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        self.inner.invoke(call, ctx)
    }
    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        task: &'a buddy_core::RecordedTask,
        ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        self.inner.resume(call, task, ctx)
    }
    fn is_external(&self, name: &str) -> bool {
        self.inner.is_external(name)
    }
    fn latest(&self) -> BoxFuture<'_, Option<(u64, Arc<dyn Toolbox>)>> {
        Box::pin(async move {
            let (generation, inner) = self.inner.latest().await?;
            let next: Arc<dyn Toolbox> = Arc::new(SkillsOnly::new(inner));
            Some((generation, next))
        })
    }
}

/// The server's tools (its operator's agents among them) and the request's agents.
struct WithRequestAgents {
    inner: Arc<dyn Toolbox>,
    /// The request's agents over the server's skills (its other tools are `inner`'s).
    agents: Arc<dyn Toolbox>,
    names: HashSet<String>,
    specs: Vec<ToolSpec>,
}

impl WithRequestAgents {
    fn new(inner: Arc<dyn Toolbox>, agents: Arc<dyn Toolbox>, names: HashSet<String>) -> Self {
        let mut specs = inner.specs().to_vec();
        specs.extend(
            agents
                .specs()
                .iter()
                .filter(|s| names.contains(&s.name))
                .cloned(),
        );
        WithRequestAgents {
            inner,
            agents,
            names,
            specs,
        }
    }
}

impl Toolbox for WithRequestAgents {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }
    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        match self.names.contains(name) {
            true => self.agents.semantics(name),
            false => self.inner.semantics(name),
        }
    }
    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        match self.names.contains(&call.name) {
            true => self.agents.invoke(call, ctx),
            false => self.inner.invoke(call, ctx),
        }
    }
    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        task: &'a buddy_core::RecordedTask,
        ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        self.inner.resume(call, task, ctx)
    }
    fn is_external(&self, name: &str) -> bool {
        !self.names.contains(name) && self.inner.is_external(name)
    }
    fn is_agent(&self, name: &str) -> bool {
        self.names.contains(name) || self.inner.is_agent(name)
    }
    /// The server's tools that change (an MCP server's list) are followed; the request's
    /// agents stay (their own skills follow through theirs).
    fn latest(&self) -> BoxFuture<'_, Option<(u64, Arc<dyn Toolbox>)>> {
        Box::pin(async move {
            let (generation, inner) = self.inner.latest().await?;
            let next: Arc<dyn Toolbox> = Arc::new(WithRequestAgents::new(
                inner,
                Arc::clone(&self.agents),
                self.names.clone(),
            ));
            Some((generation, next))
        })
    }
}
