//! Skills of buddy's own beside the tools of MCP servers, as one toolbox whose list
//! follows the servers' `notifications/tools/list_changed`.

use std::sync::Arc;

use buddy_core::ToolSpec;
use buddy_core::{BoxFuture, RepeatSemantics, Skill, SkillContext, ToolCall, ToolOutcome, Toolbox};
use buddy_skills::{RegistryError, SkillRegistry};

use crate::skill::McpSkill;
use crate::source::{McpError, McpSource};

/// The toolbox could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ToolboxError {
    #[error(transparent)]
    Server(#[from] McpError),
    #[error("{0}; give one of the MCP servers another `tool_prefix`")]
    Clash(RegistryError),
}

/// Makes an empty registry with the operator's settings (timeouts, result caps).
pub type RegistryFactory = Box<dyn Fn() -> SkillRegistry + Send + Sync>;

/// buddy's skills plus every tool of every MCP server. A turn asks [`Toolbox::latest`]
/// before each model call; when a server said its tools changed, they are listed again
/// and the next call offers the new list.
pub struct McpToolbox {
    base: Vec<Arc<dyn Skill>>,
    sources: Vec<Arc<McpSource>>,
    make_registry: RegistryFactory,
    /// The registry as first built (what [`Toolbox::specs`] shows).
    first: Arc<SkillRegistry>,
    current: tokio::sync::Mutex<Generation>,
}

struct Generation {
    number: u64,
    registry: Arc<SkillRegistry>,
    /// Each source's skills as last listed, in source order.
    listed: Vec<Vec<Arc<dyn Skill>>>,
}

impl McpToolbox {
    /// Starts every server (at once) and builds the toolbox; a server that cannot start,
    /// or two tools with one name, is an error that names it.
    pub async fn start(
        base: Vec<Arc<dyn Skill>>,
        sources: Vec<Arc<McpSource>>,
        make_registry: RegistryFactory,
    ) -> Result<Self, ToolboxError> {
        let started =
            futures::future::join_all(sources.iter().map(|s| McpSkill::all(Arc::clone(s)))).await;
        let listed = started.into_iter().collect::<Result<Vec<_>, _>>()?;
        let registry =
            Arc::new(build(&make_registry, &base, &listed).map_err(ToolboxError::Clash)?);
        Ok(McpToolbox {
            base,
            sources,
            make_registry,
            first: Arc::clone(&registry),
            current: tokio::sync::Mutex::new(Generation {
                number: 0,
                registry,
                listed,
            }),
        })
    }

    /// The MCP servers, for their state.
    pub fn sources(&self) -> &[Arc<McpSource>] {
        &self.sources
    }

    /// The current registry, after listing again the servers that announced a change.
    /// A server that fails to list keeps its earlier tools (its calls will say why).
    pub async fn refreshed(&self) -> (u64, Arc<SkillRegistry>) {
        let mut current = self.current.lock().await;
        let changed: Vec<usize> = self
            .sources
            .iter()
            .enumerate()
            .filter(|(_, s)| s.take_tools_changed())
            .map(|(i, _)| i)
            .collect();
        if !changed.is_empty() {
            let mut listed = current.listed.clone();
            for i in changed {
                match McpSkill::all(Arc::clone(&self.sources[i])).await {
                    Ok(skills) => listed[i] = skills,
                    Err(e) => {
                        tracing::warn!(error = %e, "an MCP server's changed tool list could not be read; its earlier tools stay")
                    }
                }
            }
            match build(&self.make_registry, &self.base, &listed) {
                Ok(registry) => {
                    current.number += 1;
                    current.registry = Arc::new(registry);
                    current.listed = listed;
                    tracing::info!(
                        generation = current.number,
                        tools = current.registry.specs().len(),
                        "MCP tool list changed"
                    );
                }
                Err(e) => {
                    tracing::warn!(error = %e, "an MCP server's new tool list clashes; the earlier list stays")
                }
            }
        }
        (current.number, Arc::clone(&current.registry))
    }
}

fn build(
    make_registry: &RegistryFactory,
    base: &[Arc<dyn Skill>],
    listed: &[Vec<Arc<dyn Skill>>],
) -> Result<SkillRegistry, RegistryError> {
    let mut registry = make_registry();
    registry.register_all(base.iter().cloned())?;
    for skills in listed {
        registry.register_all(skills.iter().cloned())?;
    }
    Ok(registry)
}

impl Toolbox for McpToolbox {
    fn specs(&self) -> &[ToolSpec] {
        self.first.specs()
    }

    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        self.first.semantics(name)
    }

    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        self.first.invoke(call, ctx)
    }

    fn latest(&self) -> BoxFuture<'_, Option<(u64, Arc<dyn Toolbox>)>> {
        Box::pin(async move {
            let (number, registry) = self.refreshed().await;
            Some((number, registry as Arc<dyn Toolbox>))
        })
    }
}
