//! Sub-agents: declared agents offered to a model as tools. Each call runs a fresh turn
//! on the same engine under one shared ledger per top-level turn (`tree.rs`), so a whole
//! tree of agents keeps the top-level turn's limits; depth, spawns and agents running at
//! once are bounded; cancellation reaches every descendant; each child ends typed.

mod child_tasks;
mod declaration;
mod forward;
mod outcome;
mod scope;
mod skill;
mod toolbox;

pub(crate) use child_tasks::of_agent_call;
pub use declaration::{AgentSpec, AgentSpecError, MAX_HISTORY};
pub use outcome::{AgentOutcome, AgentStatus};
pub(crate) use scope::Scope;
pub(crate) use skill::as_line;
pub use skill::{AgentSet, AgentSkill, attach_agents};
