//! Agents as tools: each declared agent is a skill taking a task; calling it runs a
//! fresh turn on the same engine, judge and sandbox, under a lease on the calling turn's
//! tree, and returns its typed outcome.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use buddy_core::{
    AgentHop, BoxFuture, ChatEvent, GuardAction, GuardKind, Message, Provider, RepeatSemantics,
    Skill, SkillContext, SkillError, ToolEntry, ToolTable, Toolbox,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::declaration::{AgentSpec, AgentSpecError};
use super::forward::forward;
use super::outcome::AgentOutcome;
use super::scope::Scope;
use super::toolbox::{agent_entry, with_agents};
use crate::engine::Engine;
use crate::request::TurnRequest;

/// Room in a sub-agent's event channel before it waits for its caller's stream.
const CHILD_EVENTS: usize = 256;

/// The declared agents, with the skills and providers they draw on.
pub struct AgentSet {
    specs: Vec<AgentSpec>,
    base: Arc<dyn Toolbox>,
    provider: Arc<dyn Provider>,
    providers: HashMap<String, Arc<dyn Provider>>,
}

impl AgentSet {
    /// The agents `specs`: their skills come from `base`, their model calls go to
    /// `provider`, or to the one of `providers` their declaration names. Every
    /// declaration is checked, and so are the names they use.
    pub fn new(
        specs: Vec<AgentSpec>,
        base: Arc<dyn Toolbox>,
        provider: Arc<dyn Provider>,
        providers: HashMap<String, Arc<dyn Provider>>,
    ) -> Result<Arc<Self>, AgentSpecError> {
        let mut names = HashSet::new();
        for spec in &specs {
            spec.check()?;
            if !names.insert(spec.name.as_str()) {
                return Err(AgentSpecError::Duplicate(spec.name.clone()));
            }
            if base.semantics(&spec.name).is_some() {
                return Err(AgentSpecError::ClashesWithSkill {
                    agent: spec.name.clone(),
                });
            }
            if let Some(provider) = &spec.provider
                && !providers.contains_key(provider)
            {
                return Err(AgentSpecError::UnknownProvider {
                    agent: spec.name.clone(),
                    provider: provider.clone(),
                });
            }
        }
        for spec in &specs {
            if let Some(missing) = spec.agents.iter().find(|a| !names.contains(a.as_str())) {
                return Err(AgentSpecError::UnknownAgent {
                    agent: spec.name.clone(),
                    missing: missing.clone(),
                });
            }
        }
        Ok(Arc::new(AgentSet {
            specs,
            base,
            provider,
            providers,
        }))
    }

    /// Every declared agent as a skill, for the top-level turn's toolbox.
    pub fn skills(self: &Arc<Self>) -> Vec<AgentSkill> {
        (0..self.specs.len())
            .map(|index| AgentSkill {
                set: Arc::clone(self),
                index,
            })
            .collect()
    }

    /// The top-level turn's toolbox: the base's tools and every declared agent.
    pub fn toolbox(self: &Arc<Self>) -> Arc<dyn Toolbox> {
        self.attach(Arc::clone(&self.base))
    }

    /// `tools` (the base's, or a server's with its operator's agents among them) with
    /// every declared agent beside them: the one place agents join a turn's tools.
    pub fn attach(self: &Arc<Self>, tools: Arc<dyn Toolbox>) -> Arc<dyn Toolbox> {
        let agents = self.skills().into_iter().map(as_tool).collect();
        Arc::new(with_agents(tools, None, agents, Vec::new()))
    }

    /// Every declared agent as a table entry.
    pub fn entries(self: &Arc<Self>) -> Vec<ToolEntry> {
        self.skills()
            .into_iter()
            .map(|agent| agent_entry(as_tool(agent)))
            .collect()
    }

    /// The toolbox of agent `index`: the skills its declaration allows and the agents
    /// it lists — those named in `on_path` (itself) and every one when it may not
    /// delegate (the last level of depth) are not offered, and refuse a call typed.
    fn child_toolbox(
        self: &Arc<Self>,
        index: usize,
        may_delegate: bool,
        on_path: &[&str],
    ) -> ToolTable {
        let spec = &self.specs[index];
        let (agents, hidden): (Vec<AgentSkill>, Vec<AgentSkill>) = spec
            .agents
            .iter()
            .filter_map(|name| self.skill(name))
            .partition(|agent| may_delegate && !on_path.contains(&agent.name()));
        with_agents(
            Arc::clone(&self.base),
            Some(spec.skills.clone()),
            agents.into_iter().map(as_tool).collect(),
            hidden.into_iter().map(as_tool).collect(),
        )
    }

    /// The declarations, in order.
    pub fn specs(&self) -> &[AgentSpec] {
        &self.specs
    }

    /// The agent named `name` as a skill.
    fn skill(self: &Arc<Self>, name: &str) -> Option<AgentSkill> {
        let index = self.specs.iter().position(|s| s.name == name)?;
        Some(AgentSkill {
            set: Arc::clone(self),
            index,
        })
    }

    fn spec_at(&self, index: usize) -> &AgentSpec {
        &self.specs[index]
    }
}

/// `tools` with the `declared` agents offered beside them (none declared: `tools` as
/// they are): the one door by which buddy.toml's, a scenario's and a server's agents join
/// a turn's tools. The agents' skills are `tools`' own; their model calls go to
/// `provider`, or to the one of `providers` a declaration names.
pub fn attach_agents(
    declared: Vec<AgentSpec>,
    tools: Arc<dyn Toolbox>,
    provider: Arc<dyn Provider>,
    providers: HashMap<String, Arc<dyn Provider>>,
) -> Result<Arc<dyn Toolbox>, AgentSpecError> {
    if declared.is_empty() {
        return Ok(tools);
    }
    Ok(AgentSet::new(declared, tools, provider, providers)?.toolbox())
}

/// One declared agent, offered to a model as a tool that takes a task.
#[derive(Clone)]
pub struct AgentSkill {
    set: Arc<AgentSet>,
    index: usize,
}

impl AgentSkill {
    fn spec(&self) -> &AgentSpec {
        self.set.spec_at(self.index)
    }
}

impl Skill for AgentSkill {
    fn name(&self) -> &str {
        &self.spec().name
    }

    fn description(&self) -> &str {
        &self.spec().description
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"task": {
                "type": "string",
                "description": "The whole task for this agent: it sees nothing else of the conversation."
            }},
            "required": ["task"]
        })
    }

    /// The same task handed to the same agent again is a repeat: it is answered from the
    /// earlier outcome, and the loop guards count it.
    fn semantics(&self) -> RepeatSemantics {
        RepeatSemantics::Pure
    }

    /// A sub-agent is bounded by its lease, its deadline and the stall watch, not by the
    /// per-call timeout of skills.
    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_secs(7 * 24 * 3600))
    }

    fn is_agent(&self) -> bool {
        true
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: SkillContext,
    ) -> BoxFuture<'a, Result<String, SkillError>> {
        Box::pin(async move {
            let Some(task) = args.get("task").and_then(Value::as_str) else {
                return Err(SkillError::Failed(
                    "send the agent its task: {\"task\": \"…\"}".into(),
                ));
            };
            let scope = Scope::current().ok_or_else(|| {
                SkillError::Failed(format!(
                    "`{}` is a sub-agent and runs only inside a turn",
                    self.name()
                ))
            })?;
            let hop = AgentHop {
                agent: self.name().to_owned(),
                call_id: ctx.call_id,
            };
            let outcome = self.delegate(task, &scope, hop).await;
            if outcome.is_error() {
                Err(SkillError::Failed(outcome.to_result()))
            } else {
                Ok(outcome.to_result())
            }
        })
    }
}

impl AgentSkill {
    /// Runs the agent on `task` under `scope`'s lease, from refusal checks to its typed end.
    async fn delegate(&self, task: &str, scope: &Scope, hop: AgentHop) -> AgentOutcome {
        let name = self.name();
        if scope.place.path().iter().any(|h| h.agent == name) {
            let why = format!(
                "`{name}` is already running in this chain of agents ({}); an agent may not start itself. Do the work here",
                path_words(scope.place.path())
            );
            return refuse(scope, name, why).await;
        }
        let slot = tokio::select! {
            biased;
            _ = scope.cancel.cancelled() => None,
            slot = scope.place.wait_for_room() => slot,
        };
        let Some(_slot) = slot else {
            return AgentOutcome::refused(name, "the calling turn was cancelled".into());
        };
        let lease = match scope.place.open_child(hop.clone()) {
            Ok(lease) => lease,
            Err(refusal) => return refuse(scope, name, refusal.to_string()).await,
        };
        let request = match self.request(task, scope, &hop) {
            Ok(request) => request,
            Err(why) => return AgentOutcome::refused(name, why),
        };
        let cancel = request.cancel.clone();
        let on_path: Vec<&str> = lease.path().iter().map(|h| h.agent.as_str()).collect();
        let may_delegate = scope.place.child_depth() < scope.place.max_depth();
        let toolbox = self.set.child_toolbox(self.index, may_delegate, &on_path);
        let provider = self.provider();
        let engine = Engine::new(provider, Arc::new(toolbox));
        let (tx, rx) = mpsc::channel(CHILD_EVENTS);
        let stall = scope.policy.child_stall_secs.map(Duration::from_secs);
        let (turn, watched) = tokio::join!(
            engine.run_leased(request, lease, tx),
            forward(rx, hop, scope.events.clone(), stall, cancel)
        );
        if watched.stalled {
            let quiet = stall.map_or(0, |d| d.as_secs());
            announce(
                scope,
                name,
                GuardAction::StoppedAgent,
                format!(
                    "`{name}` sent nothing for {quiet} s (policy child_stall_secs) and was stopped; its work so far is returned, marked partial"
                ),
            )
            .await;
        }
        AgentOutcome::of_turn(name, (&turn).into(), &watched.so_far, watched.stalled)
    }

    /// The provider the agent's model calls go to: the one its declaration names, else
    /// the calling turn's.
    fn provider(&self) -> Arc<dyn Provider> {
        match &self.spec().provider {
            Some(named) => self.set.providers.get(named).cloned(),
            None => None,
        }
        .unwrap_or_else(|| Arc::clone(&self.set.provider))
    }

    /// What the agent's `model` charges: the calling turn's price when it runs the same
    /// model on the same provider; else the same lookup as a turn's (the operator's
    /// `prices` first, by the provider it calls), or the list price without a table.
    fn price(&self, scope: &Scope, model: &str) -> Option<buddy_core::Price> {
        let spec = self.spec();
        if spec.provider.is_none() && model == scope.model {
            return scope.price;
        }
        match &scope.prices {
            Some(table) => table.price(self.provider().name(), model),
            None if model != scope.model => crate::prices::default_price(model),
            None => scope.price,
        }
    }

    /// The sub-agent's turn: its instructions and task, its policy over the caller's,
    /// carved to what the tree has left, and the caller's deadline.
    fn request(&self, task: &str, scope: &Scope, hop: &AgentHop) -> Result<TurnRequest, String> {
        let spec = self.spec();
        let place = &scope.place;
        let mut policy = scope.policy.clone();
        policy
            .apply(&spec.policy)
            .map_err(|e| format!("agent `{}`: {e}", spec.name))?;
        // Its own answer is held back already: what is free plus that one.
        policy.max_model_calls = policy.max_model_calls.min(place.calls_left() + 1).max(1);
        policy.max_tool_calls = policy.max_tool_calls.min(place.tool_calls_left()).max(1);
        if let Some(at) = scope.deadline {
            let left = u64::try_from(at.saturating_duration_since(Instant::now()).as_millis())
                .unwrap_or(u64::MAX)
                .max(1);
            policy.deadline_ms = Some(policy.deadline_ms.map_or(left, |own| own.min(left)));
        }
        let model = spec.model.clone().unwrap_or_else(|| scope.model.clone());
        let mut history = Vec::new();
        if !spec.instructions.trim().is_empty() {
            history.push(Message::system(spec.instructions.clone()));
        }
        let shown = usize::try_from(spec.history).unwrap_or(0);
        let user = if shown > 0 && !scope.recent.is_empty() {
            let from = scope.recent.len().saturating_sub(shown);
            format!(
                "{task}\n\nThe conversation this task comes from (latest messages):\n{}",
                scope.recent[from..].join("\n")
            )
        } else {
            task.to_owned()
        };
        let price = self.price(scope, &model);
        let mut request = TurnRequest::new(model, user)
            .with_price(price)
            .with_clock(scope.clock.clone())
            .with_history(history)
            .with_policy(policy)
            .with_cancel(scope.cancel.child_token())
            .with_call_slots(scope.call_slots.clone())
            .with_tasks(
                scope
                    .task_log
                    .clone()
                    .map(|log| super::child_tasks::ChildTasks::of_call(&hop.call_id, log)),
                HashMap::new(),
            );
        if let Some(observer) = &scope.observer {
            request.observer = observer.sub_agent(&hop.call_id, &spec.name);
        }
        Ok(request)
    }
}

/// An agent as a table holds it.
fn as_tool(agent: AgentSkill) -> Arc<dyn Skill> {
    Arc::new(agent)
}

/// A refused delegation: announced in the calling turn's stream, returned typed.
async fn refuse(scope: &Scope, agent: &str, why: String) -> AgentOutcome {
    announce(scope, agent, GuardAction::Refused, why.clone()).await;
    AgentOutcome::refused(agent, why)
}

/// A delegation bound that acted, in the calling turn's stream.
async fn announce(scope: &Scope, agent: &str, action: GuardAction, detail: String) {
    let _ = scope
        .events
        .send(ChatEvent::GuardTripped {
            guard: GuardKind::Delegation,
            action,
            skill: Some(agent.to_owned()),
            detail,
            evidence: Vec::new(),
        })
        .await;
}

/// A chain of agents in words: `top > researcher > reader`.
fn path_words(path: &[AgentHop]) -> String {
    std::iter::once("top-level turn")
        .chain(path.iter().map(|h| h.agent.as_str()))
        .collect::<Vec<_>>()
        .join(" > ")
}

/// A message of the calling conversation as a line of text for a sub-agent.
pub(crate) fn as_line(message: &Message) -> Option<String> {
    let (who, text) = match message {
        Message::User { content, .. } => ("user", content.as_str()),
        Message::Assistant { content, .. } => ("assistant", content.as_deref().unwrap_or_default()),
        _ => return None,
    };
    (!text.trim().is_empty()).then(|| format!("{who}: {}", text.trim()))
}
