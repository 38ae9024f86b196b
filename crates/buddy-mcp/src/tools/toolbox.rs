//! Skills of buddy's own beside the tools of MCP servers, as one toolbox whose list
//! follows the servers' `notifications/tools/list_changed`.

use std::sync::Arc;

use buddy_core::ToolSpec;
use buddy_core::{
    BoxFuture, RecordedTask, RepeatSemantics, Skill, SkillContext, SkillError, ToolCall,
    ToolOutcome, Toolbox,
};
use buddy_skills::{RegistryError, SkillRegistry};

use crate::client::source::{McpError, McpSource};
use crate::requests::caller::Caller;
use crate::tools::skill::McpSkill;

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

/// The tools of some toolbox (buddy's skills) and every tool of some MCP servers, as one
/// toolbox. A turn asks [`Toolbox::latest`] before each model call; when a server said
/// its tools changed, they are listed again and the next call offers the new list.
pub struct McpToolbox {
    base: Arc<dyn Toolbox>,
    sources: Vec<Arc<McpSource>>,
    make_registry: RegistryFactory,
    /// The tools as first listed (what [`Toolbox::specs`] shows).
    first: Arc<Joined>,
    current: tokio::sync::Mutex<Generation>,
}

struct Generation {
    number: u64,
    joined: Arc<Joined>,
    /// Each source's skills as last listed, in source order.
    listed: Vec<Vec<Arc<dyn Skill>>>,
}

/// `base` beside a registry of MCP skills.
struct Joined {
    base: Arc<dyn Toolbox>,
    mcp: SkillRegistry,
    specs: Vec<ToolSpec>,
    /// The servers, for waiting again on a task after a restart.
    sources: Vec<Arc<McpSource>>,
}

impl McpToolbox {
    /// Starts every server (at once) and joins their tools to `base`'s; a server that
    /// cannot start, or a tool name taken twice, is an error that names it.
    pub async fn start(
        base: Arc<dyn Toolbox>,
        sources: Vec<Arc<McpSource>>,
        make_registry: RegistryFactory,
    ) -> Result<Self, ToolboxError> {
        let started =
            futures::future::join_all(sources.iter().map(|s| McpSkill::all(Arc::clone(s)))).await;
        let listed = started.into_iter().collect::<Result<Vec<_>, _>>()?;
        let joined =
            Arc::new(join(&base, &make_registry, &listed, &sources).map_err(ToolboxError::Clash)?);
        Ok(McpToolbox {
            base,
            sources,
            make_registry,
            first: Arc::clone(&joined),
            current: tokio::sync::Mutex::new(Generation {
                number: 0,
                joined,
                listed,
            }),
        })
    }

    /// The MCP servers, for their state.
    pub fn sources(&self) -> &[Arc<McpSource>] {
        &self.sources
    }

    /// The current tools, after listing again those of the servers that announced a
    /// change. A server that fails to list keeps its earlier tools (its calls say why).
    pub async fn refreshed(&self) -> (u64, Arc<dyn Toolbox>) {
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
            match join(&self.base, &self.make_registry, &listed, &self.sources) {
                Ok(joined) => {
                    current.number += 1;
                    current.joined = Arc::new(joined);
                    current.listed = listed;
                    tracing::info!(
                        generation = current.number,
                        tools = current.joined.specs.len(),
                        "MCP tool list changed"
                    );
                }
                Err(e) => {
                    tracing::warn!(error = %e, "an MCP server's new tool list clashes; the earlier list stays")
                }
            }
        }
        (
            current.number,
            Arc::clone(&current.joined) as Arc<dyn Toolbox>,
        )
    }
}

fn join(
    base: &Arc<dyn Toolbox>,
    make_registry: &RegistryFactory,
    listed: &[Vec<Arc<dyn Skill>>],
    sources: &[Arc<McpSource>],
) -> Result<Joined, RegistryError> {
    let mut mcp = make_registry();
    for skills in listed {
        mcp.register_all(skills.iter().cloned())?;
    }
    let mut specs = base.specs().to_vec();
    for spec in mcp.specs() {
        if specs.iter().any(|s| s.name == spec.name) {
            return Err(RegistryError::Duplicate(spec.name.clone()));
        }
        specs.push(spec.clone());
    }
    Ok(Joined {
        base: Arc::clone(base),
        mcp,
        specs,
        sources: sources.to_vec(),
    })
}

impl Toolbox for Joined {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        self.mcp
            .semantics(name)
            .or_else(|| self.base.semantics(name))
    }

    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        if self.mcp.semantics(&call.name).is_some() {
            self.mcp.invoke(call, ctx)
        } else {
            self.base.invoke(call, ctx)
        }
    }

    fn is_external(&self, name: &str) -> bool {
        self.base.is_external(name)
    }

    fn is_agent(&self, name: &str) -> bool {
        self.mcp.semantics(name).is_none() && self.base.is_agent(name)
    }

    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        task: &'a RecordedTask,
        ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        let Some(source) = self.sources.iter().find(|s| s.config().name == task.server) else {
            return self.base.resume(call, task, ctx);
        };
        // A stdio server's tasks ended with the process that started it.
        source.config().url.as_ref()?;
        Some(Box::pin(async move {
            match source.resume_task(&task.task_id, Caller::of(&ctx)).await {
                Ok(text) => ToolOutcome::ok(text),
                Err(SkillError::Failed(text)) => ToolOutcome::error(text),
                Err(SkillError::Fatal(text)) => ToolOutcome {
                    content: text,
                    is_error: true,
                    fatal: true,
                },
            }
        }))
    }
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

    fn is_external(&self, name: &str) -> bool {
        self.first.is_external(name)
    }

    fn is_agent(&self, name: &str) -> bool {
        self.first.is_agent(name)
    }

    fn latest(&self) -> BoxFuture<'_, Option<(u64, Arc<dyn Toolbox>)>> {
        Box::pin(async move { Some(self.refreshed().await) })
    }

    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        task: &'a RecordedTask,
        ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        self.first.resume(call, task, ctx)
    }
}
