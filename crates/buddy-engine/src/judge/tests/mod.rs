//! The judge, rule by rule, at each rule's boundary: one short of the threshold passes,
//! the threshold trips. No provider, no toolbox: rounds are fed to the judge directly.

use std::collections::HashMap;

use buddy_core::{GuardAction, GuardKind, RepeatSemantics, StopReason, ToolCall, ToolOutcome};
use serde_json::json;

use crate::approval::{ApprovalMode, ApprovalRules, Decision};
use crate::judge::memory::Judge;
use crate::judge::round::{Plan, RoundFacts, RoundJudge, RoundVerdict};
use crate::judge::verdict::Trip;
use crate::policy::LoopPolicy;

mod failures;
mod gates;
mod generated;
mod limits;
mod repeats;
mod warn_then_end;

/// What one round did.
#[derive(Debug)]
struct Seen {
    plans: Vec<Plan>,
    trips: Vec<Trip>,
    verdict: RoundVerdict,
}

impl Seen {
    fn guards(&self) -> Vec<(GuardKind, GuardAction)> {
        self.trips.iter().map(|t| (t.guard, t.action)).collect()
    }

    fn stop(&self) -> Option<(StopReason, GuardKind)> {
        self.verdict.cause.as_ref().map(|c| (c.reason, c.guard))
    }
}

/// A turn as the judge sees it: rounds of calls with results, counted like the driver.
struct Turn {
    judge: Judge,
    tool_calls: u32,
    model_calls: u32,
    tools: Vec<String>,
    approval: ApprovalRules,
    next_id: usize,
}

impl Turn {
    fn new(policy: LoopPolicy) -> Self {
        Turn {
            judge: Judge::new(policy),
            tool_calls: 0,
            model_calls: 0,
            tools: vec![
                "search".into(),
                "read".into(),
                "status".into(),
                "write".into(),
            ],
            approval: ApprovalRules::default(),
            next_id: 0,
        }
    }

    fn call(&mut self, name: &str, args: serde_json::Value) -> ToolCall {
        self.next_id += 1;
        ToolCall::new(format!("c{}", self.next_id), name, args.to_string())
    }

    /// One round: `calls` beside `text`, every call of skill semantics `semantics`,
    /// results from `result`.
    fn round_with(
        &mut self,
        text: &str,
        calls: Vec<(&str, serde_json::Value)>,
        semantics: RepeatSemantics,
        decisions: HashMap<String, Decision>,
        result: &dyn Fn(&ToolCall) -> ToolOutcome,
    ) -> Seen {
        self.model_calls += 1;
        let calls: Vec<ToolCall> = calls
            .into_iter()
            .map(|(name, args)| self.call(name, args))
            .collect();
        let semantics = vec![Some(semantics); calls.len()];
        let mut decisions = decisions;
        let mut round = RoundJudge::begin(&mut self.judge, text, Vec::new());
        let facts = RoundFacts {
            tool_calls_so_far: self.tool_calls,
            tools_offered: true,
            approval: &self.approval,
            tree_tool_calls: u32::MAX,
        };
        let (slots, mut trips) =
            round.plan(&mut self.judge, calls, &semantics, &mut decisions, facts);
        for slot in &slots {
            match &slot.plan {
                Plan::Run => {
                    self.tool_calls += 1;
                    let outcome = result(&slot.call);
                    trips.extend(round.observe(&mut self.judge, slot, &outcome));
                }
                Plan::Answer { content, is_error } => round.not_run(slot, content, *is_error),
                Plan::SameAs(_) => {}
            }
        }
        let names: Vec<&str> = self.tools.iter().map(String::as_str).collect();
        let verdict = round.end(&mut self.judge, false, self.model_calls, &names);
        Seen {
            plans: slots.into_iter().map(|s| s.plan).collect(),
            trips,
            verdict,
        }
    }

    fn round(
        &mut self,
        calls: Vec<(&str, serde_json::Value)>,
        semantics: RepeatSemantics,
        result: &dyn Fn(&ToolCall) -> ToolOutcome,
    ) -> Seen {
        self.round_with("", calls, semantics, HashMap::new(), result)
    }
}

fn same(text: &'static str) -> impl Fn(&ToolCall) -> ToolOutcome {
    move |_| ToolOutcome::ok(text)
}

fn quiet(policy: LoopPolicy) -> LoopPolicy {
    LoopPolicy {
        show_budget: false,
        max_model_calls: 1000,
        max_tool_calls: 10_000,
        ..policy
    }
}
