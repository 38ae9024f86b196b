//! The tools of MCP servers as a live source of a tool table, beside buddy's own skills;
//! the table follows the servers' `notifications/tools/list_changed`.

use std::sync::Arc;

use buddy_core::{
    BoxFuture, LiveTools, RecordedTask, RepeatSemantics, Skill, SkillContext, SkillError, ToolCall,
    ToolEntry, ToolKind, ToolOutcome, ToolRunner, ToolSpec, ToolTable, Toolbox,
};
use buddy_skills::{RegistryError, SkillRegistry};

use crate::client::source::{McpError, McpSource};
use crate::requests::caller::Caller;
use crate::tools::retry;
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

/// Every tool of some MCP servers, as the live source of a table: when a server said its
/// tools changed, they are listed again and the next look at the table offers the new list.
pub struct McpTools {
    sources: Vec<Arc<McpSource>>,
    make_registry: RegistryFactory,
    current: tokio::sync::Mutex<Generation>,
}

struct Generation {
    number: u64,
    entries: Arc<[ToolEntry]>,
    /// Each source's skills as last listed, in source order.
    listed: Vec<Vec<Arc<dyn Skill>>>,
}

impl McpTools {
    /// Starts every server (at once) and lists their tools. A required server that
    /// cannot start, or a tool two servers name alike, is an error that names it; one
    /// that is not required is left out (its state says why) and tried again in the
    /// background, its tools joining when it comes up.
    pub async fn start(
        sources: Vec<Arc<McpSource>>,
        make_registry: RegistryFactory,
    ) -> Result<Self, ToolboxError> {
        let started =
            futures::future::join_all(sources.iter().map(|s| McpSkill::all(Arc::clone(s)))).await;
        let mut listed = Vec::with_capacity(sources.len());
        for (source, result) in sources.iter().zip(started) {
            match result {
                Ok(skills) => listed.push(skills),
                Err(error) if !source.config().required => {
                    retry::start_later(source, &error);
                    listed.push(Vec::new());
                }
                Err(error) => return Err(error.into()),
            }
        }
        let entries = entries(&make_registry, &listed, &sources).map_err(ToolboxError::Clash)?;
        Ok(McpTools {
            sources,
            make_registry,
            current: tokio::sync::Mutex::new(Generation {
                number: 0,
                entries,
                listed,
            }),
        })
    }

    /// The MCP servers, for their state.
    pub fn sources(&self) -> &[Arc<McpSource>] {
        &self.sources
    }

    /// The current generation and tools, after listing again those of the servers that
    /// announced a change. A server that fails to list keeps its earlier tools (its
    /// calls say why).
    async fn refreshed(&self) -> (u64, Arc<[ToolEntry]>) {
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
            match entries(&self.make_registry, &listed, &self.sources) {
                Ok(entries) => {
                    current.number += 1;
                    current.entries = entries;
                    current.listed = listed;
                    tracing::info!(
                        generation = current.number,
                        tools = current.entries.len(),
                        "MCP tool list changed"
                    );
                }
                Err(e) => {
                    tracing::warn!(error = %e, "an MCP server's new tool list clashes; the earlier list stays")
                }
            }
        }
        (current.number, Arc::clone(&current.entries))
    }
}

impl LiveTools for McpTools {
    fn current(&self) -> BoxFuture<'_, (u64, Arc<[ToolEntry]>)> {
        Box::pin(self.refreshed())
    }
}

/// The listed skills as table entries, run through one registry (argument checks,
/// timeouts, result caps) that also waits again on a server's task after a restart.
fn entries(
    make_registry: &RegistryFactory,
    listed: &[Vec<Arc<dyn Skill>>],
    sources: &[Arc<McpSource>],
) -> Result<Arc<[ToolEntry]>, RegistryError> {
    let mut registry = make_registry();
    for skills in listed {
        registry.register_all(skills.iter().cloned())?;
    }
    let specs: Vec<ToolSpec> = registry.specs().to_vec();
    let runner = Arc::new(McpRunner {
        registry,
        sources: sources.to_vec(),
    });
    Ok(specs
        .into_iter()
        .map(|spec| {
            let semantics = runner
                .registry
                .semantics(&spec.name)
                .unwrap_or(RepeatSemantics::Observed);
            ToolEntry::run_by(spec, semantics, ToolKind::Mcp, Arc::clone(&runner) as _)
        })
        .collect())
}

/// Runs MCP tools' calls, and waits again on a task one became before a restart.
struct McpRunner {
    registry: SkillRegistry,
    sources: Vec<Arc<McpSource>>,
}

impl ToolRunner for McpRunner {
    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        self.registry.invoke(call, ctx)
    }

    fn resume<'a>(
        &'a self,
        _call: &'a ToolCall,
        task: &'a RecordedTask,
        ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        let source = self
            .sources
            .iter()
            .find(|s| s.config().name == task.server)?;
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

/// A table of `base`'s tools with every tool of some MCP servers after them. Its
/// [`Toolbox`] impl is the table's (MCP's one door in, kept for callers that hold it).
pub struct McpToolbox {
    tools: Arc<McpTools>,
    table: ToolTable,
}

impl McpToolbox {
    /// Starts every server and joins their tools to `base`'s; a server that cannot
    /// start, or a tool name taken twice, is an error that names it.
    pub async fn start(
        base: Arc<dyn Toolbox>,
        sources: Vec<Arc<McpSource>>,
        make_registry: RegistryFactory,
    ) -> Result<Self, ToolboxError> {
        let tools = Arc::new(McpTools::start(sources, make_registry).await?);
        let table = ToolTable::builder()
            .toolbox(base)
            .live(Arc::clone(&tools) as Arc<dyn LiveTools>)
            .build()
            .await
            .map_err(|clash| ToolboxError::Clash(RegistryError::Duplicate(clash.name)))?;
        Ok(McpToolbox { tools, table })
    }

    /// The MCP servers, for their state.
    pub fn sources(&self) -> &[Arc<McpSource>] {
        self.tools.sources()
    }

    /// The current tools and their generation (see [`McpTools`]).
    pub async fn refreshed(&self) -> (u64, Arc<dyn Toolbox>) {
        let now = self.table.refreshed().await;
        (now.generation(), Arc::new(now))
    }

    /// The table itself, for a turn.
    pub fn into_table(self) -> ToolTable {
        self.table
    }
}

impl Toolbox for McpToolbox {
    fn specs(&self) -> &[ToolSpec] {
        self.table.specs()
    }
    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        self.table.semantics(name)
    }
    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        self.table.invoke(call, ctx)
    }
    fn is_external(&self, name: &str) -> bool {
        self.table.is_external(name)
    }
    fn is_agent(&self, name: &str) -> bool {
        self.table.is_agent(name)
    }
    fn latest(&self) -> BoxFuture<'_, Option<(u64, Arc<dyn Toolbox>)>> {
        self.table.latest()
    }
    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        task: &'a RecordedTask,
        ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        self.table.resume(call, task, ctx)
    }
    fn as_table(&self) -> Option<&ToolTable> {
        Some(&self.table)
    }
}
