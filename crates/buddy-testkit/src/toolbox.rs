use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use buddy_core::{
    BoxFuture, RepeatSemantics, SkillContext, ToolCall, ToolOutcome, ToolSpec, Toolbox,
};

type Behaviour = dyn Fn(&ToolCall, usize) -> ToolOutcome + Send + Sync;

/// One tool of a [`TestToolbox`].
pub struct TestTool {
    pub semantics: RepeatSemantics,
    pub delay: Duration,
    behaviour: Box<Behaviour>,
    calls: AtomicUsize,
}

impl TestTool {
    /// A tool whose result is `behaviour(call, n)` (n counts this tool's calls from 1).
    pub fn new(
        behaviour: impl Fn(&ToolCall, usize) -> ToolOutcome + Send + Sync + 'static,
    ) -> Self {
        TestTool {
            semantics: RepeatSemantics::Observed,
            delay: Duration::ZERO,
            behaviour: Box::new(behaviour),
            calls: AtomicUsize::new(0),
        }
    }

    /// A tool that echoes its arguments.
    pub fn echo() -> Self {
        TestTool::new(|call, n| {
            ToolOutcome::ok(format!(
                "result {n} of {} for {}",
                call.name, call.arguments
            ))
        })
    }

    /// Sets the repeat semantics.
    pub fn semantics(mut self, semantics: RepeatSemantics) -> Self {
        self.semantics = semantics;
        self
    }

    /// Makes each call take `delay`.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A toolbox of programmable tools, counting how many calls actually ran.
#[derive(Default)]
pub struct TestToolbox {
    specs: Vec<ToolSpec>,
    tools: HashMap<String, TestTool>,
    executed: Arc<AtomicUsize>,
    in_flight: AtomicUsize,
    max_in_flight: Arc<AtomicUsize>,
}

impl TestToolbox {
    /// An empty toolbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool named `name`.
    pub fn with(mut self, name: &str, tool: TestTool) -> Self {
        self.specs.push(ToolSpec {
            name: name.to_owned(),
            description: format!("test tool {name}"),
            parameters: serde_json::json!({"type": "object"}),
        });
        self.tools.insert(name.to_owned(), tool);
        self
    }

    /// A counter of executed calls, readable after the toolbox moved into an engine.
    pub fn executed(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.executed)
    }

    /// The most calls that were running at the same time.
    pub fn max_in_flight(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.max_in_flight)
    }
}

impl Toolbox for TestToolbox {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        self.tools.get(name).map(|t| t.semantics)
    }

    fn invoke<'a>(&'a self, call: &'a ToolCall, _ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let Some(tool) = self.tools.get(&call.name) else {
                return ToolOutcome::error(format!("unknown tool `{}`", call.name));
            };
            let n = tool.calls.fetch_add(1, Ordering::SeqCst) + 1;
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_in_flight.fetch_max(now, Ordering::SeqCst);
            if !tool.delay.is_zero() {
                tokio::time::sleep(tool.delay).await;
            }
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            self.executed.fetch_add(1, Ordering::SeqCst);
            (tool.behaviour)(call, n)
        })
    }
}
