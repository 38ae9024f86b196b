//! The ledger of a tree of agents: one per top-level turn, shared by every sub-agent
//! under it. Model calls, tool calls, tokens and money are drawn from one pool, so a
//! tree can never spend more than its top-level turn was allowed, however wide it fans
//! out; each turn holds a lease on it.

use std::sync::{Arc, Mutex, MutexGuard};

use buddy_core::{AgentHop, DelegatedStats, TurnStats, Usd};
use tokio::sync::Semaphore;

use crate::policy::{LoopPolicy, OnLimit};

/// The ceilings of a whole tree: the top-level turn's policy.
#[derive(Clone, Debug)]
struct Limits {
    model_calls: u32,
    /// Each turn of the tree keeps one model call back for its own final answer.
    reserve: bool,
    tool_calls: u32,
    tokens: Option<u64>,
    cost: Option<Usd>,
    depth: u32,
    spawns: u32,
    running: usize,
}

impl Limits {
    /// True once `pool` has reached the tree's token or money budget.
    fn budget_spent(&self, pool: &Pool) -> bool {
        self.tokens.is_some_and(|budget| pool.tokens >= budget)
            || self.cost.is_some_and(|budget| pool.cost >= budget)
    }
}

/// What the tree has used and holds back, under one lock.
#[derive(Debug, Default)]
struct Pool {
    model_calls: u32,
    /// Model calls held back, one for each live turn's final answer.
    reserved: u32,
    tool_calls: u32,
    spawns: u32,
    tokens: u64,
    cost: Usd,
}

/// One top-level turn's shared ledger.
#[derive(Debug)]
struct Tree {
    limits: Limits,
    pool: Mutex<Pool>,
}

impl Tree {
    fn pool(&self) -> MutexGuard<'_, Pool> {
        // A panic while the lock was held leaves plain counters behind: still usable.
        self.pool
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One turn's place in the tree.
#[derive(Debug)]
struct Node {
    parent: Option<Arc<Node>>,
    depth: u32,
    path: Vec<AgentHop>,
    /// What this turn's descendants used.
    delegated: Mutex<DelegatedStats>,
    /// Room for this turn's sub-agents running at once; more wait in order (a fair queue).
    running: Semaphore,
}

/// Why a sub-agent could not be started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The tree is as deep as the policy allows.
    Depth { max: u32 },
    /// The top-level turn started as many sub-agents as it may.
    Spawns { max: u32 },
    /// No model call is left for a sub-agent's answer.
    Calls { max: u32 },
    /// No tool call is left.
    ToolCalls { max: u32 },
    /// The tree's token or money budget is spent.
    Budget,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Depth { max } => write!(
                f,
                "sub-agents may nest {max} deep (policy max_agent_depth) and this one would go deeper; do the work yourself"
            ),
            Refusal::Spawns { max } => write!(
                f,
                "this turn already started {max} sub-agents (policy max_agent_spawns); answer from what they found"
            ),
            Refusal::Calls { max } => write!(
                f,
                "the turn's {max} model calls (shared by every agent in it) are spent or held for answers; answer from what you have"
            ),
            Refusal::ToolCalls { max } => write!(
                f,
                "the turn's {max} tool calls (shared by every agent in it) are spent; answer from what you have"
            ),
            Refusal::Budget => write!(
                f,
                "the turn's token or money budget (shared by every agent in it) is spent; answer from what you have"
            ),
        }
    }
}

/// Why the tree stops a turn before its next model call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TreeStop {
    /// Every model call of the tree is used or held for another turn's answer.
    Calls {
        max: u32,
        used: u32,
    },
    Tokens {
        budget: u64,
        used: u64,
    },
    Cost {
        budget: Usd,
        spent: Usd,
        next: Usd,
    },
}

/// A turn's handle on its tree: the calls it draws, the usage it books, the reserve it
/// holds for its own answer (returned when the lease is dropped).
#[derive(Debug)]
pub(crate) struct Lease {
    tree: Arc<Tree>,
    node: Arc<Node>,
    holds_reserve: bool,
    /// This turn's own figures as last booked.
    booked: TurnStats,
}

/// Where in the tree a sub-agent is started from: the calling turn's node, cheap to
/// clone into a tool call's scope.
#[derive(Clone, Debug)]
pub(crate) struct Place {
    tree: Arc<Tree>,
    node: Arc<Node>,
}

impl Lease {
    /// The lease of a top-level turn under `policy`.
    pub(crate) fn root(policy: &LoopPolicy) -> Lease {
        let limits = Limits {
            model_calls: policy.max_model_calls,
            reserve: policy.on_limit == OnLimit::Finalize,
            tool_calls: policy.max_tool_calls,
            tokens: policy.max_turn_tokens,
            cost: policy.max_turn_cost_usd,
            depth: policy.max_agent_depth,
            spawns: policy.max_agent_spawns,
            running: usize::try_from(policy.max_running_agents)
                .unwrap_or(1)
                .max(1),
        };
        let reserve = limits.reserve;
        let running = limits.running;
        let tree = Arc::new(Tree {
            limits,
            pool: Mutex::new(Pool {
                reserved: u32::from(reserve),
                ..Pool::default()
            }),
        });
        Lease {
            tree,
            node: Arc::new(Node {
                parent: None,
                depth: 0,
                path: Vec::new(),
                delegated: Mutex::new(DelegatedStats::default()),
                running: Semaphore::new(running),
            }),
            holds_reserve: reserve,
            booked: TurnStats::default(),
        }
    }

    /// Where sub-agents of this turn start from.
    pub(crate) fn place(&self) -> Place {
        Place {
            tree: Arc::clone(&self.tree),
            node: Arc::clone(&self.node),
        }
    }

    /// Draws one model call for a round of the turn; false when the tree has none left
    /// beyond the answers it holds back.
    pub(crate) fn take_round_call(&mut self) -> bool {
        let max = self.tree.limits.model_calls;
        let mut pool = self.tree.pool();
        if pool.model_calls + pool.reserved < max {
            pool.model_calls += 1;
            true
        } else {
            false
        }
    }

    /// Whether the tree has a model call left for a round, beyond the answers it holds
    /// back (what [`Lease::take_round_call`] would draw, not drawn).
    pub(crate) fn has_round_call(&self) -> bool {
        let pool = self.tree.pool();
        pool.model_calls + pool.reserved < self.tree.limits.model_calls
    }

    /// Draws the call for the turn's final answer: its reserve, or a free call if it has
    /// none; false when neither is left (buddy then answers from the tool results).
    pub(crate) fn take_final_call(&mut self) -> bool {
        if std::mem::take(&mut self.holds_reserve) {
            let mut pool = self.tree.pool();
            pool.reserved = pool.reserved.saturating_sub(1);
            pool.model_calls += 1;
            return true;
        }
        self.take_round_call()
    }

    /// Draws up to `wanted` tool calls; returns how many the tree grants.
    pub(crate) fn take_tool_calls(&mut self, wanted: u32) -> u32 {
        let max = self.tree.limits.tool_calls;
        let mut pool = self.tree.pool();
        let granted = wanted.min(max.saturating_sub(pool.tool_calls));
        pool.tool_calls += granted;
        granted
    }

    /// Returns `unused` tool calls drawn with [`Lease::take_tool_calls`] to the pool.
    pub(crate) fn give_back_tool_calls(&mut self, unused: u32) {
        let mut pool = self.tree.pool();
        pool.tool_calls = pool.tool_calls.saturating_sub(unused);
    }

    /// Books this turn's figures so far (`own`: the turn's own calls, tokens and money):
    /// what changed since the last booking joins the pool and every ancestor's share.
    pub(crate) fn book(&mut self, own: &TurnStats) {
        let delta = DelegatedStats {
            agents: 0,
            model_calls: own.model_calls.saturating_sub(self.booked.model_calls),
            tool_calls: own.tool_calls.saturating_sub(self.booked.tool_calls),
            input_tokens: own.input_tokens.saturating_sub(self.booked.input_tokens),
            output_tokens: own.output_tokens.saturating_sub(self.booked.output_tokens),
            cache_read_tokens: own
                .cache_read_tokens
                .saturating_sub(self.booked.cache_read_tokens),
            cache_write_tokens: own
                .cache_write_tokens
                .saturating_sub(self.booked.cache_write_tokens),
            cost_usd: match (own.cost_usd, self.booked.cost_usd) {
                (Some(now), before) => Some(Usd::from_nanos(
                    now.nanos()
                        .saturating_sub(before.unwrap_or_default().nanos()),
                )),
                (None, _) => None,
            },
        };
        self.booked = *own;
        if delta == DelegatedStats::default() {
            return;
        }
        {
            let mut pool = self.tree.pool();
            pool.tokens = pool
                .tokens
                .saturating_add(delta.input_tokens + delta.output_tokens);
            pool.cost = pool.cost.saturating_add(delta.cost_usd.unwrap_or_default());
        }
        let mut up = self.node.parent.clone();
        while let Some(node) = up {
            add(&mut lock(&node.delegated), &delta);
            up = node.parent.clone();
        }
    }

    /// Whether the tree's token or money budget stops the next model call (estimated at
    /// `next`, with the answer after it as much again).
    pub(crate) fn stop_before_call(&self, next: Option<Usd>) -> Option<TreeStop> {
        let limits = &self.tree.limits;
        let pool = self.tree.pool();
        if let Some(budget) = limits.tokens
            && pool.tokens >= budget
        {
            return Some(TreeStop::Tokens {
                budget,
                used: pool.tokens,
            });
        }
        if let (Some(budget), Some(next)) = (limits.cost, next) {
            let after = pool
                .cost
                .saturating_add(Usd::from_nanos(next.nanos().saturating_mul(2)));
            if after > budget {
                return Some(TreeStop::Cost {
                    budget,
                    spent: pool.cost,
                    next,
                });
            }
        }
        None
    }

    /// True for a sub-agent once the tree's token or money budget is spent: it ends
    /// with what it has instead of making an answer call the caller would pay for.
    pub(crate) fn child_out_of_budget(&self) -> bool {
        if self.node.parent.is_none() {
            return false;
        }
        let limits = &self.tree.limits;
        let pool = self.tree.pool();
        limits.budget_spent(&pool)
    }

    /// The stop of a turn that could not draw a model call for its next round.
    pub(crate) fn calls_spent(&self) -> TreeStop {
        TreeStop::Calls {
            max: self.tree.limits.model_calls,
            used: self.tree.pool().model_calls,
        }
    }

    /// What this turn's descendants used so far.
    pub(crate) fn delegated(&self) -> DelegatedStats {
        *lock(&self.node.delegated)
    }

    /// The agents from the top-level turn down to this one (empty at the top).
    pub(crate) fn path(&self) -> &[AgentHop] {
        &self.node.path
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.holds_reserve {
            let mut pool = self.tree.pool();
            pool.reserved = pool.reserved.saturating_sub(1);
        }
    }
}

/// A slot among a turn's running sub-agents, held for as long as the child runs.
pub(crate) type RunningSlot<'a> = tokio::sync::SemaphorePermit<'a>;

impl Place {
    /// Waits for room among this turn's running sub-agents (in order of asking).
    pub(crate) async fn wait_for_room(&self) -> Option<RunningSlot<'_>> {
        self.node.running.acquire().await.ok()
    }

    /// How deep the tree may grow (policy `max_agent_depth` of the top-level turn).
    pub(crate) fn max_depth(&self) -> u32 {
        self.tree.limits.depth
    }

    /// How deep a child started here would be.
    pub(crate) fn child_depth(&self) -> u32 {
        self.node.depth + 1
    }

    /// The agents from the top-level turn down to the calling turn.
    pub(crate) fn path(&self) -> &[AgentHop] {
        &self.node.path
    }

    /// Model calls a child started now could make at most (its own answer included).
    pub(crate) fn calls_left(&self) -> u32 {
        let pool = self.tree.pool();
        self.tree
            .limits
            .model_calls
            .saturating_sub(pool.model_calls + pool.reserved)
    }

    /// Tool calls the tree has left.
    pub(crate) fn tool_calls_left(&self) -> u32 {
        self.tree
            .limits
            .tool_calls
            .saturating_sub(self.tree.pool().tool_calls)
    }

    /// Draws one model call a tool of this turn makes for its server (MCP sampling),
    /// from the same pool as the turn's rounds: refused when only the calls held back
    /// for answers are left, or the tree's token or money budget is spent.
    pub(crate) fn take_side_call(&self) -> Result<(), Refusal> {
        let limits = &self.tree.limits;
        let mut pool = self.tree.pool();
        if pool.model_calls + pool.reserved >= limits.model_calls {
            return Err(Refusal::Calls {
                max: limits.model_calls,
            });
        }
        if limits.budget_spent(&pool) {
            return Err(Refusal::Budget);
        }
        pool.model_calls += 1;
        Ok(())
    }

    /// Books what a call drawn by [`Place::take_side_call`] used: its tokens and money
    /// join the pool at once (the next draw and the next round see them), and the whole
    /// of it every ancestor's share (as a sub-agent's calls are). The turn adds it to the
    /// stats it reports at its end.
    pub(crate) fn book_side(&self, used: &DelegatedStats) {
        {
            let mut pool = self.tree.pool();
            pool.tokens = pool
                .tokens
                .saturating_add(used.input_tokens + used.output_tokens);
            pool.cost = pool.cost.saturating_add(used.cost_usd.unwrap_or_default());
        }
        let mut up = self.node.parent.clone();
        while let Some(node) = up {
            add(&mut lock(&node.delegated), used);
            up = node.parent.clone();
        }
    }

    /// Opens a child's lease for `hop`: the depth and spawn bounds are checked, and one
    /// model call is held back for the child's answer.
    pub(crate) fn open_child(&self, hop: AgentHop) -> Result<Lease, Refusal> {
        let limits = &self.tree.limits;
        let depth = self.node.depth + 1;
        if depth > limits.depth {
            return Err(Refusal::Depth { max: limits.depth });
        }
        {
            let mut pool = self.tree.pool();
            if pool.spawns >= limits.spawns {
                return Err(Refusal::Spawns { max: limits.spawns });
            }
            if pool.tool_calls >= limits.tool_calls {
                return Err(Refusal::ToolCalls {
                    max: limits.tool_calls,
                });
            }
            if pool.model_calls + pool.reserved >= limits.model_calls {
                return Err(Refusal::Calls {
                    max: limits.model_calls,
                });
            }
            if limits.budget_spent(&pool) {
                return Err(Refusal::Budget);
            }
            pool.spawns += 1;
            if limits.reserve {
                pool.reserved += 1;
            }
        }
        let started = DelegatedStats {
            agents: 1,
            ..DelegatedStats::default()
        };
        let mut up = Some(Arc::clone(&self.node));
        while let Some(node) = up {
            add(&mut lock(&node.delegated), &started);
            up = node.parent.clone();
        }
        let mut path = self.node.path.clone();
        path.push(hop);
        Ok(Lease {
            tree: Arc::clone(&self.tree),
            node: Arc::new(Node {
                parent: Some(Arc::clone(&self.node)),
                depth,
                path,
                delegated: Mutex::new(DelegatedStats::default()),
                running: Semaphore::new(limits.running),
            }),
            holds_reserve: limits.reserve,
            booked: TurnStats::default(),
        })
    }
}

fn lock(m: &Mutex<DelegatedStats>) -> MutexGuard<'_, DelegatedStats> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn add(into: &mut DelegatedStats, delta: &DelegatedStats) {
    into.agents += delta.agents;
    into.model_calls += delta.model_calls;
    into.tool_calls += delta.tool_calls;
    into.input_tokens += delta.input_tokens;
    into.output_tokens += delta.output_tokens;
    into.cache_read_tokens += delta.cache_read_tokens;
    into.cache_write_tokens += delta.cache_write_tokens;
    if let Some(cost) = delta.cost_usd {
        into.cost_usd = Some(into.cost_usd.unwrap_or_default().saturating_add(cost));
    }
}

/// `own` with what the turn's sub-agents used added in: a turn's stats cover its tree.
pub(crate) fn with_delegated(own: TurnStats, delegated: DelegatedStats) -> TurnStats {
    if delegated == DelegatedStats::default() {
        return own;
    }
    TurnStats {
        model_calls: own.model_calls + delegated.model_calls,
        tool_calls: own.tool_calls + delegated.tool_calls,
        input_tokens: own.input_tokens + delegated.input_tokens,
        output_tokens: own.output_tokens + delegated.output_tokens,
        cache_read_tokens: own.cache_read_tokens + delegated.cache_read_tokens,
        cache_write_tokens: own.cache_write_tokens + delegated.cache_write_tokens,
        cost_usd: match (own.cost_usd, delegated.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or_default().saturating_add(b.unwrap_or_default())),
        },
        delegated,
        ..own
    }
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
