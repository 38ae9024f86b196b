//! The tools a model call offers: none once the policy withdraws them, else the
//! toolbox's latest list less the withdrawn skills (plus `finish` when the policy offers it).

use std::borrow::Cow;

use buddy_core::ToolSpec;
use tracing::debug;

use super::{ToolboxHandle, Turn};
use crate::judge::{FINISH_TOOL, Offer};
use crate::tape::{TapeStep, tools_of};
use crate::words;

impl<'e> Turn<'e> {
    /// The tools to offer the next call, or `None` for a plain chat call.
    pub(super) async fn tools_for_next_call(&mut self) -> Option<Cow<'e, [ToolSpec]>> {
        match self.judge.offer(self.stats.model_calls) {
            Offer::Nothing(trip) => {
                if let Some(trip) = trip {
                    self.announce(trip).await;
                }
                return None;
            }
            Offer::Tools => {}
        }
        self.follow_tool_changes().await;
        let judge = &self.judge;
        let finish_tool = judge.policy().finish_tool;
        // The usual case borrows the toolbox's own list: no copy per model call.
        let specs = match self.toolbox_handle() {
            ToolboxHandle::Base(base) if judge.nothing_withdrawn() && !finish_tool => {
                Cow::Borrowed(base.specs())
            }
            toolbox => {
                let mut specs: Vec<ToolSpec> = toolbox
                    .specs()
                    .iter()
                    .filter(|s| !judge.is_withdrawn(&s.name))
                    .cloned()
                    .collect();
                if finish_tool {
                    specs.push(finish_tool_spec());
                }
                Cow::Owned(specs)
            }
        };
        (!specs.is_empty()).then_some(specs)
    }

    /// Switches to the toolbox's latest generation when its tools changed (an MCP server
    /// added or removed tools between rounds).
    async fn follow_tool_changes(&mut self) {
        let Some((generation, toolbox)) = self.base_toolbox.latest().await else {
            return;
        };
        let previous = self.live.as_ref().map(|(g, _)| *g);
        if previous == Some(generation) {
            return;
        }
        if previous.is_some() {
            let names: Vec<&str> = toolbox.specs().iter().map(|t| t.name.as_str()).collect();
            debug!(generation, tools = %names.join(","), "the tool list changed; the next call offers the new list");
        }
        let tools = tools_of(&*toolbox);
        if tools != self.tape.tools || previous.is_some() {
            self.tape.steps.push(TapeStep::Tools {
                before_call: self.stats.model_calls + 1,
                tools,
            });
        }
        self.window.tools_cache = None;
        self.live = Some((generation, toolbox));
    }
}

/// The spec of the `finish` tool.
fn finish_tool_spec() -> ToolSpec {
    ToolSpec {
        name: FINISH_TOOL.to_owned(),
        description: words::FINISH_DESCRIPTION.to_owned(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"answer": {"type": "string", "description": words::FINISH_ANSWER_DESCRIPTION}},
            "required": ["answer"],
        }),
    }
}
