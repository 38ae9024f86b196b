//! Agents attached to a turn's tools, in one place: for a sub-agent, the base's skills its
//! declaration allows and the agents it may delegate to; for the top-level turn, every
//! tool of the base and every declared agent. Agents it may not start (itself, or any at
//! the last level of depth) are not offered, but a call to one still reaches the agent,
//! which refuses it typed.

use std::sync::Arc;

use buddy_core::{
    BoxFuture, Keep, Skill, SkillContext, SkillError, ToolCall, ToolEntry, ToolKind, ToolOutcome,
    ToolRunner, ToolTable, Toolbox,
};

use crate::glob::glob_match;

/// Runs a call to one agent: its arguments parsed, its turn run, its outcome as the result.
struct AgentRunner(Arc<dyn Skill>);

impl ToolRunner for AgentRunner {
    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let args = match serde_json::from_str::<serde_json::Value>(call.arguments.as_str()) {
                Ok(args) => args,
                Err(e) => {
                    return ToolOutcome::error(format!(
                        "the arguments of `{}` are not JSON ({e}); send {{\"task\": \"…\"}}",
                        call.name
                    ));
                }
            };
            match self.0.execute(args, ctx).await {
                Ok(text) => ToolOutcome::ok(text),
                Err(SkillError::Failed(text)) => ToolOutcome::error(text),
                Err(SkillError::Fatal(text)) => ToolOutcome {
                    content: text,
                    is_error: true,
                    fatal: true,
                },
            }
        })
    }
}

/// `agent` as an entry of a table.
pub(crate) fn agent_entry(agent: Arc<dyn Skill>) -> ToolEntry {
    let (spec, semantics) = (agent.spec(), agent.semantics());
    ToolEntry::run_by(
        spec,
        semantics,
        ToolKind::Agent,
        Arc::new(AgentRunner(agent)),
    )
}

/// The tools one turn of a tree is given: `base`'s tools that `allowed` names (globs;
/// `None`: every one), the `agents` on offer, and the `hidden` ones that refuse a call.
/// The caller has checked that no agent has a tool's name; a name the base gains later
/// keeps its first entry.
pub(crate) fn with_agents(
    base: Arc<dyn Toolbox>,
    allowed: Option<Vec<String>>,
    agents: Vec<Arc<dyn Skill>>,
    hidden: Vec<Arc<dyn Skill>>,
) -> ToolTable {
    let keep = match allowed {
        None => Keep::All,
        Some(globs) => Keep::Named(Arc::new(move |name: &str| {
            globs.iter().any(|p| glob_match(p, name))
        })),
    };
    ToolTable::builder()
        .toolbox_keeping(base, keep)
        .entries(agents.into_iter().map(agent_entry))
        .entries(hidden.into_iter().map(|a| agent_entry(a).hidden()))
        .build_first_wins()
}
