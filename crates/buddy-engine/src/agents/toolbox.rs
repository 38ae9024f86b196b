//! A toolbox with agents beside a base toolbox's skills: for a sub-agent, the skills its
//! declaration allows and the agents it may delegate to; for the top-level turn, every
//! skill and every declared agent. Agents it may not start (itself, or any at the last
//! level of depth) are not offered, but a call to one still reaches the agent, which
//! refuses it typed.

use std::sync::Arc;

use buddy_core::{
    BoxFuture, RepeatSemantics, Skill, SkillContext, SkillError, ToolCall, ToolOutcome, ToolSpec,
    Toolbox,
};

use crate::glob::glob_match;

/// The tools one turn of a tree is given.
pub(crate) struct AgentToolbox {
    base: Arc<dyn Toolbox>,
    /// Names or globs of the base's skills on offer.
    allowed: Vec<String>,
    /// Agents on offer.
    agents: Vec<Arc<dyn Skill>>,
    /// Agents it may not start: refused (by the agent) if called.
    hidden: Vec<Arc<dyn Skill>>,
    specs: Vec<ToolSpec>,
}

impl AgentToolbox {
    /// `base`'s skills that `allowed` names, the `agents` on offer, and the `hidden` ones.
    pub(crate) fn new(
        base: Arc<dyn Toolbox>,
        allowed: Vec<String>,
        agents: Vec<Arc<dyn Skill>>,
        hidden: Vec<Arc<dyn Skill>>,
    ) -> Self {
        let mut specs: Vec<ToolSpec> = base
            .specs()
            .iter()
            .filter(|s| allowed.iter().any(|p| glob_match(p, &s.name)))
            .cloned()
            .collect();
        specs.extend(agents.iter().map(|a| a.spec()));
        AgentToolbox {
            base,
            allowed,
            agents,
            hidden,
            specs,
        }
    }

    fn agent(&self, name: &str) -> Option<&Arc<dyn Skill>> {
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

    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        task: &'a buddy_core::RecordedTask,
        ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        match self.allows(&call.name) {
            true => self.base.resume(call, task, ctx),
            false => None,
        }
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
            let next: Arc<dyn Toolbox> = Arc::new(AgentToolbox::new(
                base,
                self.allowed.clone(),
                self.agents.clone(),
                self.hidden.clone(),
            ));
            Some((generation, next))
        })
    }
}
