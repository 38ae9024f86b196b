//! The tools a turn is offered, as one table: every tool by name with its spec, repeat
//! semantics, kind and how it runs, built by one builder from its sources (a skill
//! registry, MCP servers, sub-agents, a client's own tools). A source adds entries; no
//! source wraps another. A table whose sources can change (an MCP server's list) is
//! followed by taking a new snapshot ([`Toolbox::latest`]).

use std::collections::HashMap;
use std::sync::Arc;

use crate::{
    BoxFuture, RecordedTask, RepeatSemantics, SkillContext, ToolCall, ToolOutcome, ToolSpec,
    Toolbox,
};

/// Where a tool comes from, which says how a call to it is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ToolKind {
    /// One of buddy's own skills (built-in, command, Rust): run here.
    Skill,
    /// A tool of an MCP server: run by that server.
    Mcp,
    /// A sub-agent: a call runs a turn of its own under the calling turn's budget.
    Agent,
    /// A tool the client declared and runs itself: a call pauses the turn.
    Client,
}

/// Runs the calls of one source's tools.
pub trait ToolRunner: Send + Sync {
    /// Validates and runs one call; never fails (errors are error outcomes).
    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome>;
    /// Waits again on `task`, the task `call` became before a restart; `None`: cannot.
    fn resume<'a>(
        &'a self,
        _call: &'a ToolCall,
        _task: &'a RecordedTask,
        _ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        None
    }
}

/// One tool of a table.
#[derive(Clone)]
pub struct ToolEntry {
    /// What the model is shown.
    pub spec: ToolSpec,
    /// How a repeat of it is read.
    pub semantics: RepeatSemantics,
    /// Where it comes from.
    pub kind: ToolKind,
    /// Shown to the model; a hidden entry (an agent this turn may not start) still
    /// answers a call, so the refusal is typed rather than "unknown tool".
    pub offered: bool,
    /// Who runs it; `None` for a client's tool, which buddy never runs.
    runner: Option<Arc<dyn ToolRunner>>,
}

impl ToolEntry {
    /// A tool run by `runner`.
    pub fn run_by(
        spec: ToolSpec,
        semantics: RepeatSemantics,
        kind: ToolKind,
        runner: Arc<dyn ToolRunner>,
    ) -> Self {
        ToolEntry {
            spec,
            semantics,
            kind,
            offered: true,
            runner: Some(runner),
        }
    }

    /// A tool the client declared: offered, never run here (a call to it pauses the turn),
    /// and effectful (the client's tools are read as never silently re-run).
    pub fn client(spec: ToolSpec) -> Self {
        ToolEntry {
            spec,
            semantics: RepeatSemantics::Effectful,
            kind: ToolKind::Client,
            offered: true,
            runner: None,
        }
    }

    /// The same entry, not offered to the model.
    pub fn hidden(mut self) -> Self {
        self.offered = false;
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }
}

impl std::fmt::Debug for ToolEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolEntry")
            .field("name", &self.spec.name)
            .field("semantics", &self.semantics)
            .field("kind", &self.kind)
            .field("offered", &self.offered)
            .finish()
    }
}

/// A source whose tools change while turns use them (an MCP server announcing a new
/// list): a generation bumped on every change, and its entries as they are now.
pub trait LiveTools: Send + Sync {
    /// The current generation and entries; cheap when nothing changed.
    fn current(&self) -> BoxFuture<'_, (u64, Arc<[ToolEntry]>)>;
}

/// Which of a source table's entries a new table takes.
#[derive(Clone)]
pub enum Keep {
    /// Every entry.
    All,
    /// Every entry but sub-agents (what a request's agents may use as skills).
    NotAgents,
    /// The entries whose name the predicate accepts (a sub-agent's allowed skills).
    Named(Arc<dyn Fn(&str) -> bool + Send + Sync>),
}

impl Keep {
    fn keeps(&self, entry: &ToolEntry) -> bool {
        match self {
            Keep::All => true,
            Keep::NotAgents => entry.kind != ToolKind::Agent,
            Keep::Named(accepts) => accepts(&entry.spec.name),
        }
    }
}

/// One source of a table, in the order the builder was given them.
#[derive(Clone)]
enum Source {
    Entries(Vec<ToolEntry>),
    Live(Arc<dyn LiveTools>),
    /// Another toolbox's tools (a table, a registry, a replay's): followed when it changes.
    Toolbox(Arc<dyn Toolbox>, Keep),
}

/// Two sources name the same tool: which one a call meant would be a guess.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("two tools are named `{name}`")]
pub struct DuplicateTool {
    /// The name given twice.
    pub name: String,
    /// The kind of the entry that came later.
    pub kind: ToolKind,
}

/// Builds a [`ToolTable`] from its sources, in order: the order of the tools offered.
#[derive(Clone, Default)]
pub struct ToolTableBuilder {
    sources: Vec<Source>,
}

impl ToolTableBuilder {
    /// `entries`, fixed.
    pub fn entries(mut self, entries: impl IntoIterator<Item = ToolEntry>) -> Self {
        self.sources
            .push(Source::Entries(entries.into_iter().collect()));
        self
    }

    /// The client's own tools: offered, run by the client.
    pub fn client_tools(self, specs: impl IntoIterator<Item = ToolSpec>) -> Self {
        self.entries(specs.into_iter().map(ToolEntry::client))
    }

    /// A source whose tools change.
    pub fn live(mut self, source: Arc<dyn LiveTools>) -> Self {
        self.sources.push(Source::Live(source));
        self
    }

    /// Every tool of `toolbox` (a registry, a table, a test's toolbox).
    pub fn toolbox(self, toolbox: Arc<dyn Toolbox>) -> Self {
        self.toolbox_keeping(toolbox, Keep::All)
    }

    /// The tools of `toolbox` that `keep` takes.
    pub fn toolbox_keeping(mut self, toolbox: Arc<dyn Toolbox>, keep: Keep) -> Self {
        self.sources.push(Source::Toolbox(toolbox, keep));
        self
    }

    /// The entries of the fixed sources and toolboxes as they are now (live ones left out).
    fn fixed_entries(&self) -> Vec<ToolEntry> {
        let mut gathered = Vec::new();
        for source in &self.sources {
            match source {
                Source::Entries(entries) => gathered.extend(entries.iter().cloned()),
                Source::Live(_) => {}
                Source::Toolbox(toolbox, keep) => gathered.extend(entries_of(toolbox, keep)),
            }
        }
        gathered
    }

    /// The table as its sources are now; a name given twice is an error.
    pub async fn build(self) -> Result<ToolTable, DuplicateTool> {
        let (generation, taken) = take(&self.sources).await;
        let entries = entries_taken(taken);
        let snapshot = Snapshot::new(entries, generation, self.sources)?;
        Ok(ToolTable(Arc::new(snapshot)))
    }

    /// The table from fixed sources only (entries and toolboxes), without waiting: a
    /// toolbox is taken as it is now. Live sources are left for [`Toolbox::latest`].
    pub fn build_now(self) -> Result<ToolTable, DuplicateTool> {
        let gathered = self.fixed_entries();
        let snapshot = Snapshot::new(gathered, 0, self.sources)?.waiting_for_live();
        Ok(ToolTable(Arc::new(snapshot)))
    }

    /// Like [`ToolTableBuilder::build_now`] where the caller has already refused names
    /// given twice: a name a source gains later keeps its first entry (logged).
    pub fn build_first_wins(self) -> ToolTable {
        let gathered = self.fixed_entries();
        ToolTable(Arc::new(
            Snapshot::first_wins(gathered, self.sources).waiting_for_live(),
        ))
    }
}

/// What one source holds now, cheap to take: compared by generation before any entry
/// is copied.
enum Taken<'s> {
    Entries(&'s [ToolEntry]),
    Live(Arc<[ToolEntry]>),
    Toolbox(Arc<dyn Toolbox>, Keep),
}

/// Every source as it is now, with the sum of their generations (each only grows, so
/// the sum moves exactly when one of them did).
async fn take(sources: &[Source]) -> (u64, Vec<Taken<'_>>) {
    let mut generation = 0u64;
    let mut taken = Vec::with_capacity(sources.len());
    for source in sources {
        taken.push(match source {
            Source::Entries(entries) => Taken::Entries(entries),
            Source::Live(live) => {
                let (number, entries) = live.current().await;
                generation = generation.saturating_add(number);
                Taken::Live(entries)
            }
            Source::Toolbox(toolbox, keep) => match toolbox.latest().await {
                Some((number, now)) => {
                    generation = generation.saturating_add(number);
                    Taken::Toolbox(now, keep.clone())
                }
                None => Taken::Toolbox(Arc::clone(toolbox), keep.clone()),
            },
        });
    }
    (generation, taken)
}

/// The entries of what [`take`] took, in source order.
fn entries_taken(taken: Vec<Taken<'_>>) -> Vec<ToolEntry> {
    let mut entries = Vec::new();
    for part in taken {
        match part {
            Taken::Entries(fixed) => entries.extend(fixed.iter().cloned()),
            Taken::Live(live) => entries.extend(live.iter().cloned()),
            Taken::Toolbox(toolbox, keep) => entries.extend(entries_of(&toolbox, &keep)),
        }
    }
    entries
}

/// A toolbox's tools as entries: each offered one, then the hidden ones a table holds.
fn entries_of(toolbox: &Arc<dyn Toolbox>, keep: &Keep) -> Vec<ToolEntry> {
    if let Some(table) = toolbox.as_table() {
        return table
            .0
            .entries
            .iter()
            .filter(|e| keep.keeps(e))
            .cloned()
            .collect();
    }
    let runner: Arc<dyn ToolRunner> = Arc::new(ToolboxRunner(Arc::clone(toolbox)));
    toolbox
        .specs()
        .iter()
        .filter_map(|spec| {
            let name = spec.name.as_str();
            let semantics = toolbox.semantics(name)?;
            let entry = match (toolbox.is_external(name), toolbox.is_agent(name)) {
                (true, _) => ToolEntry::client(spec.clone()),
                (false, agent) => {
                    let kind = if agent {
                        ToolKind::Agent
                    } else {
                        ToolKind::Skill
                    };
                    ToolEntry::run_by(spec.clone(), semantics, kind, Arc::clone(&runner))
                }
            };
            Some(ToolEntry { semantics, ..entry })
        })
        .filter(|e| keep.keeps(e))
        .collect()
}

/// Runs a plain toolbox's calls: the one bridge from a toolbox that is not a table.
struct ToolboxRunner(Arc<dyn Toolbox>);

impl ToolRunner for ToolboxRunner {
    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        self.0.invoke(call, ctx)
    }
    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        task: &'a RecordedTask,
        ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        self.0.resume(call, task, ctx)
    }
}

/// One snapshot of a turn's tools.
struct Snapshot {
    entries: Vec<ToolEntry>,
    index: HashMap<String, usize>,
    /// The offered entries' specs, in order.
    specs: Vec<ToolSpec>,
    generation: u64,
    /// How the table was built, to take a new snapshot when a source changed.
    sources: Vec<Source>,
    /// True when a source can change: only then does [`Toolbox::latest`] look.
    live: bool,
    /// Built without waiting, so a live source's entries are not in yet: the next
    /// [`Toolbox::latest`] takes them whatever the generation.
    stale: bool,
    /// The newest snapshot taken from this one, so a change is gathered once, not on
    /// every later look.
    newest: std::sync::Mutex<Option<ToolTable>>,
}

impl Snapshot {
    fn new(
        entries: Vec<ToolEntry>,
        generation: u64,
        sources: Vec<Source>,
    ) -> Result<Self, DuplicateTool> {
        let mut index = HashMap::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            if index.insert(entry.spec.name.clone(), i).is_some() {
                return Err(DuplicateTool {
                    name: entry.spec.name.clone(),
                    kind: entry.kind,
                });
            }
        }
        Ok(Self::indexed(entries, index, generation, sources))
    }

    /// Marks a snapshot built without its live sources' entries, so the next look takes them.
    fn waiting_for_live(mut self) -> Self {
        self.stale = self.sources.iter().any(|s| matches!(s, Source::Live(_)));
        self
    }

    /// `entries` whose names are unique (a later one of the same name is dropped).
    fn first_wins(entries: Vec<ToolEntry>, sources: Vec<Source>) -> Self {
        let mut index = HashMap::with_capacity(entries.len());
        let mut kept = Vec::with_capacity(entries.len());
        for entry in entries {
            if index.contains_key(&entry.spec.name) {
                tracing::warn!(tool = %entry.spec.name, "a tool named twice keeps its first entry");
                continue;
            }
            index.insert(entry.spec.name.clone(), kept.len());
            kept.push(entry);
        }
        Self::indexed(kept, index, 0, sources)
    }

    fn indexed(
        entries: Vec<ToolEntry>,
        index: HashMap<String, usize>,
        generation: u64,
        sources: Vec<Source>,
    ) -> Self {
        let specs = entries
            .iter()
            .filter(|e| e.offered)
            .map(|e| e.spec.clone())
            .collect();
        let live = sources.iter().any(|s| match s {
            Source::Entries(_) => false,
            Source::Live(_) => true,
            Source::Toolbox(toolbox, _) => toolbox.as_table().is_none_or(|t| t.0.live),
        });
        Snapshot {
            entries,
            index,
            specs,
            generation,
            sources,
            live,
            stale: false,
            newest: std::sync::Mutex::new(None),
        }
    }
}

/// The tools a turn is offered: one snapshot, cheap to clone and share.
#[derive(Clone)]
pub struct ToolTable(Arc<Snapshot>);

impl ToolTable {
    /// A builder with no sources yet.
    pub fn builder() -> ToolTableBuilder {
        ToolTableBuilder::default()
    }

    /// Every entry, offered or hidden, in order.
    pub fn entries(&self) -> &[ToolEntry] {
        &self.0.entries
    }

    /// The entry named `name`.
    pub fn entry(&self, name: &str) -> Option<&ToolEntry> {
        self.0.index.get(name).and_then(|i| self.0.entries.get(*i))
    }

    /// The snapshot's generation: the sum of its changing sources' generations.
    pub fn generation(&self) -> u64 {
        self.0.generation
    }

    /// The table as its sources are now: itself when nothing changed, else a new
    /// snapshot. A change that would name a tool twice keeps this snapshot.
    pub async fn refreshed(&self) -> ToolTable {
        if !self.0.live {
            return self.clone();
        }
        let (generation, taken) = take(&self.0.sources).await;
        if generation == self.0.generation && !self.0.stale {
            return self.clone();
        }
        let newest = self.0.newest.lock().ok().and_then(|n| n.clone());
        if let Some(newest) = newest.as_ref().filter(|n| n.generation() == generation) {
            return newest.clone();
        }
        let entries = entries_taken(taken);
        let now = match Snapshot::new(entries, generation, self.0.sources.clone()) {
            Ok(snapshot) => ToolTable(Arc::new(snapshot)),
            Err(e) => {
                tracing::warn!(error = %e, "a changed tool list names a tool twice; the earlier list stays");
                return newest.unwrap_or_else(|| self.clone());
            }
        };
        if let Ok(mut newest) = self.0.newest.lock() {
            *newest = Some(now.clone());
        }
        now
    }

    fn unknown(&self, name: &str) -> ToolOutcome {
        let names: Vec<&str> = self.0.specs.iter().map(|s| s.name.as_str()).collect();
        let available = if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        };
        ToolOutcome::error(format!(
            "unknown tool `{name}`. Available tools: {available}. Call one of these by its exact name."
        ))
    }
}

impl std::fmt::Debug for ToolTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolTable")
            .field("generation", &self.0.generation)
            .field("entries", &self.0.entries)
            .finish()
    }
}

impl Toolbox for ToolTable {
    fn specs(&self) -> &[ToolSpec] {
        &self.0.specs
    }

    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        self.entry(name).map(|e| e.semantics)
    }

    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        match self.entry(&call.name) {
            Some(ToolEntry {
                runner: Some(runner),
                ..
            }) => runner.invoke(call, ctx),
            Some(_) => {
                let outcome = ToolOutcome::error(format!(
                    "`{}` is the client's tool and runs only on the client",
                    call.name
                ));
                Box::pin(async move { outcome })
            }
            None => {
                let outcome = self.unknown(&call.name);
                Box::pin(async move { outcome })
            }
        }
    }

    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        task: &'a RecordedTask,
        ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        self.entry(&call.name)?
            .runner
            .as_ref()?
            .resume(call, task, ctx)
    }

    fn is_external(&self, name: &str) -> bool {
        self.entry(name).is_some_and(|e| e.kind == ToolKind::Client)
    }

    fn is_agent(&self, name: &str) -> bool {
        self.entry(name).is_some_and(|e| e.kind == ToolKind::Agent)
    }

    fn latest(&self) -> BoxFuture<'_, Option<(u64, Arc<dyn Toolbox>)>> {
        Box::pin(async move {
            if !self.0.live {
                return None;
            }
            let now = self.refreshed().await;
            Some((now.generation(), Arc::new(now) as Arc<dyn Toolbox>))
        })
    }

    fn as_table(&self) -> Option<&ToolTable> {
        Some(self)
    }
}

#[cfg(test)]
#[path = "tool_table_tests.rs"]
mod tests;
