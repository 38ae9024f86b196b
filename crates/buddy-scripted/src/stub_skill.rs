//! A scripted tool: canned results in call order, or a template over the arguments.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use buddy_core::{BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError};
use serde_json::Value;

use crate::clock::{ClockKind, SimClock};
use crate::scenario::{Scenario, ScenarioTool, StubResult, StubTool};

/// A [`Skill`] that plays a [`StubTool`] declaration. Each instance counts its own calls.
pub struct StubSkill {
    tool: StubTool,
    calls: AtomicUsize,
    /// The scenario's simulated clock, when its `timeline` runs on one.
    sim: Option<SimClock>,
    /// When the first call came: where a `timeline` starts.
    first: OnceLock<(Duration, tokio::time::Instant)>,
}

impl StubSkill {
    /// A fresh stub (its first call gets the first result), on real time.
    pub fn new(tool: StubTool) -> Self {
        StubSkill {
            tool,
            calls: AtomicUsize::new(0),
            sim: None,
            first: OnceLock::new(),
        }
    }

    /// The stub with its `timeline` read on `sim` (a scenario's simulated clock).
    pub fn on_clock(mut self, sim: Option<SimClock>) -> Self {
        self.sim = sim;
        self
    }

    /// Time since the first call, on the stub's clock.
    fn since_first(&self) -> Duration {
        let now = || {
            (
                self.sim.as_ref().map_or(Duration::ZERO, SimClock::elapsed),
                tokio::time::Instant::now(),
            )
        };
        let (sim_then, real_then) = *self.first.get_or_init(now);
        match &self.sim {
            Some(sim) => sim.elapsed().saturating_sub(sim_then),
            None => real_then.elapsed(),
        }
    }

    /// The `timeline` entry that answers now, if the stub has a timeline.
    fn timed(&self) -> Option<&StubResult> {
        let since = u64::try_from(self.since_first().as_millis()).unwrap_or(u64::MAX);
        self.tool
            .timeline
            .iter()
            .find(|t| t.until_ms.is_none_or(|until| since < until))
            .or(self.tool.timeline.last())
            .map(|t| &t.result)
    }
}

fn fill_template(template: &str, args: &Value, call: usize) -> String {
    let mut out = template.replace("{call}", &call.to_string());
    if let Value::Object(map) = args {
        for (key, value) in map {
            let shown = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out = out.replace(&format!("{{{key}}}"), &shown);
        }
    }
    out
}

impl Skill for StubSkill {
    fn name(&self) -> &str {
        &self.tool.name
    }

    fn description(&self) -> &str {
        &self.tool.description
    }

    fn parameters(&self) -> Value {
        self.tool.parameters.clone()
    }

    fn semantics(&self) -> RepeatSemantics {
        self.tool.semantics
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        _ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move {
            let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            if self.tool.delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(self.tool.delay_ms)).await;
            }
            let before = self
                .tool
                .lines_before
                .as_ref()
                .map_or_else(String::new, |l| {
                    (1..=l.times)
                        .map(|i| l.line.replace("{i}", &i.to_string()) + "\n")
                        .collect()
                });
            let result = match self.timed() {
                Some(result) => result,
                None if self.tool.results.is_empty() => {
                    let template = self.tool.template.as_deref().unwrap_or("ok");
                    return Ok(before + &fill_template(template, &args, call));
                }
                None => &self.tool.results[(call - 1).min(self.tool.results.len() - 1)],
            };
            match result {
                StubResult::Ok(text) => Ok(before + &fill_template(text, &args, call)),
                StubResult::Error { error } => Err(SkillError::Failed(
                    before + &fill_template(error, &args, call),
                )),
            }
        })
    }
}

impl Scenario {
    /// The scenario's simulated clock, when it runs on one (`clock: simulated`).
    pub fn simulated_clock(&self) -> Option<SimClock> {
        (self.clock == ClockKind::Simulated).then(|| self.sim.clone())
    }

    /// The clock the scenario's turns wait on (`None`: real time).
    pub fn wait_clock(&self) -> Option<Arc<dyn buddy_core::WaitClock>> {
        self.simulated_clock()
            .map(|sim| Arc::new(sim) as Arc<dyn buddy_core::WaitClock>)
    }

    /// Fresh instances of the scenario's stub tools (their call counters start at zero).
    pub fn stub_skills(&self) -> Vec<Arc<dyn Skill>> {
        self.tools
            .iter()
            .filter_map(|tool| match tool {
                ScenarioTool::Stub(stub) => Some(Arc::new(
                    StubSkill::new(stub.clone()).on_clock(self.simulated_clock()),
                ) as Arc<dyn Skill>),
                ScenarioTool::Builtin { .. } => None,
            })
            .collect()
    }
}
