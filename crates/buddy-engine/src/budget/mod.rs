//! The turn's budget, under the machine: one pool of model and tool calls, money and
//! spawns per top-level turn (`tree.rs`), leased by each turn of a tree of agents, and
//! the share a tool's own model calls draw from it (`call_budget.rs`).

mod call_budget;
mod tree;

pub(crate) use call_budget::{SamplingPrices, SideUsage, TurnCallBudget, with_side_calls};
pub(crate) use tree::{Lease, Place, TreeStop, with_delegated};
