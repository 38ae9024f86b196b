//! A sub-agent's toolbox: the skills its declaration allows, and the agents it may
//! delegate to in turn (none at the last level of depth, never one already on its path).

use std::sync::Arc;

use buddy_core::{
    BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError, ToolCall, ToolOutcome, ToolSpec,
    Toolbox,
};

use super::skill::{AgentSet, AgentSkill};
use crate::glob::glob_match;

/// The tools one sub-agent is given.
pub(crate) struct AgentToolbox {
    base: Arc<dyn Toolbox>,
    allowed: Vec<String>,
    agents: Vec<AgentSkill>,
    /// Agents it may not start (itself, or any at the last level): refused if called.
    hidden: Vec<AgentSkill>,
    specs: Vec<ToolSpec>,
}

impl AgentToolbox {
    /// The toolbox of agent `spec_index` of `set`; `may_delegate` is false at the last
    /// level of depth, and agents named in `on_path` are left out (no self-spawn).
    pub(crate) fn new(
        set: &Arc<AgentSet>,
        spec_index: usize,
        may_delegate: bool,
        on_path: &[&str],
    ) -> Self {
        let base = Arc::clone(set.base());
        let spec = set.spec_at(spec_index);
        let allowed = spec.skills.clone();
        // Agents on the path (itself) and every agent at the last level of depth are not
        // offered; called anyway, they end in a typed refusal, never in a turn.
        let (agents, hidden): (Vec<AgentSkill>, Vec<AgentSkill>) = spec
            .agents
            .iter()
            .filter_map(|name| set.skill(name))
            .partition(|agent| may_delegate && !on_path.contains(&agent.name()));
        let mut specs: Vec<ToolSpec> = base
            .specs()
            .iter()
            .filter(|s| allowed.iter().any(|p| glob_match(p, &s.name)))
            .cloned()
            .collect();
        specs.extend(agents.iter().map(Skill::spec));
        AgentToolbox {
            base,
            allowed,
            agents,
            hidden,
            specs,
        }
    }

    /// The top-level turn's toolbox: every tool of the set's base, and every declared agent.
    pub(crate) fn top(set: &Arc<AgentSet>) -> Self {
        AgentToolbox::over(Arc::clone(set.base()), set.skills())
    }

    /// All of `base`'s tools, and `agents`.
    fn over(base: Arc<dyn Toolbox>, agents: Vec<AgentSkill>) -> Self {
        let mut specs = base.specs().to_vec();
        specs.extend(agents.iter().map(Skill::spec));
        AgentToolbox {
            base,
            allowed: vec!["*".to_owned()],
            agents,
            hidden: Vec::new(),
            specs,
        }
    }

    fn agent(&self, name: &str) -> Option<&AgentSkill> {
        self.agents
            .iter()
            .chain(&self.hidden)
            .find(|a| a.name() == name)
    }

    fn allows(&self, name: &str) -> bool {
        self.allowed.iter().any(|p| glob_match(p, name)) && self.base.semantics(name).is_some()
    }
}

impl Toolbox for AgentToolbox {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        if let Some(agent) = self.agent(name) {
            return Some(agent.semantics());
        }
        self.allows(name)
            .then(|| self.base.semantics(name))
            .flatten()
    }

    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        if let Some(agent) = self.agent(&call.name) {
            return Box::pin(async move {
                let args = match serde_json::from_str::<serde_json::Value>(call.arguments.as_str())
                {
                    Ok(args) => args,
                    Err(e) => {
                        return ToolOutcome::error(format!(
                            "the arguments of `{}` are not JSON ({e}); send {{\"task\": \"…\"}}",
                            call.name
                        ));
                    }
                };
                match agent.execute(args, ctx).await {
                    Ok(text) => ToolOutcome::ok(text),
                    Err(SkillError::Failed(text)) => ToolOutcome::error(text),
                    Err(SkillError::Fatal(text)) => ToolOutcome {
                        content: text,
                        is_error: true,
                        fatal: true,
                    },
                }
            });
        }
        if self.allows(&call.name) {
            return self.base.invoke(call, ctx);
        }
        let name = call.name.clone();
        Box::pin(async move {
            ToolOutcome::error(format!(
                "this agent has no tool `{name}`; use one of the tools it was given"
            ))
        })
    }

    fn is_agent(&self, name: &str) -> bool {
        self.agent(name).is_some()
    }

    fn is_external(&self, name: &str) -> bool {
        self.agent(name).is_none() && self.allows(name) && self.base.is_external(name)
    }

    /// A base whose tools change (MCP list changes) is followed; the agents stay.
    fn latest(&self) -> BoxFuture<'_, Option<(u64, Arc<dyn Toolbox>)>> {
        Box::pin(async move {
            let (generation, base) = self.base.latest().await?;
            let mut next = AgentToolbox::over(base, self.agents.clone());
            next.allowed = self.allowed.clone();
            next.hidden = self.hidden.clone();
            next.specs.retain(|s| {
                next.agents.iter().any(|a| a.name() == s.name)
                    || next.allowed.iter().any(|p| glob_match(p, &s.name))
            });
            let next: Arc<dyn Toolbox> = Arc::new(next);
            Some((generation, next))
        })
    }
}
