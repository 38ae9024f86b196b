//! A scripted tool: canned results in call order, or a template over the arguments.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use buddy_core::{BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError};
use serde_json::Value;

use crate::scenario::{Scenario, ScenarioTool, StubResult, StubTool};

/// A [`Skill`] that plays a [`StubTool`] declaration. Each instance counts its own calls.
pub struct StubSkill {
    tool: StubTool,
    calls: AtomicUsize,
}

impl StubSkill {
    /// A fresh stub (its first call gets the first result).
    pub fn new(tool: StubTool) -> Self {
        StubSkill {
            tool,
            calls: AtomicUsize::new(0),
        }
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
            if self.tool.results.is_empty() {
                let template = self.tool.template.as_deref().unwrap_or("ok");
                return Ok(before + &fill_template(template, &args, call));
            }
            let index = (call - 1).min(self.tool.results.len() - 1);
            match &self.tool.results[index] {
                StubResult::Ok(text) => Ok(before + &fill_template(text, &args, call)),
                StubResult::Error { error } => Err(SkillError::Failed(
                    before + &fill_template(error, &args, call),
                )),
            }
        })
    }
}

impl Scenario {
    /// Fresh instances of the scenario's stub tools (their call counters start at zero).
    pub fn stub_skills(&self) -> Vec<Arc<dyn Skill>> {
        self.tools
            .iter()
            .filter_map(|tool| match tool {
                ScenarioTool::Stub(stub) => {
                    Some(Arc::new(StubSkill::new(stub.clone())) as Arc<dyn Skill>)
                }
                ScenarioTool::Builtin { .. } => None,
            })
            .collect()
    }
}
