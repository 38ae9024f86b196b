//! The gates of a round, one by one: each fires while the conditions of every gate
//! after it hold too, so the order of `GATES` is the order that decides.

use std::collections::{BTreeMap, HashMap};

use buddy_core::{GuardKind, RepeatSemantics, ToolCall, ToolOutcome};

use crate::approval::{ApprovalMode, ApprovalRules, Decision};
use crate::judge::gates::{CallFacts, GATES, Gating, pass};
use crate::judge::memory::{Judge, Resent};
use crate::judge::round::{Plan, RoundFacts, RoundJudge, Slot};
use crate::judge::route::FINISH_TOOL;
use crate::policy::LoopPolicy;

/// A call and the state around it in which the conditions of `GATES[from..]` hold
/// (as far as they can together: `unattended` needs no decision and no withdrawal).
struct Case {
    judge: Judge,
    approval: ApprovalRules,
    decisions: HashMap<String, Decision>,
    tool_calls_so_far: u32,
    tools_offered: bool,
    tree_tool_calls: u32,
    earlier: Vec<Slot>,
    semantics: RepeatSemantics,
}

fn call() -> ToolCall {
    ToolCall::new("c1", FINISH_TOOL, r#"{"answer": ""}"#)
}

fn case(from: usize) -> Case {
    let on = |gate: &str| {
        GATES
            .iter()
            .position(|g| g.name == gate)
            .is_some_and(|i| i >= from)
    };
    let mut policy = LoopPolicy {
        max_tool_calls: 10,
        ..LoopPolicy::default()
    };
    let mut case = Case {
        judge: Judge::new(LoopPolicy::default()),
        approval: ApprovalRules::default(),
        decisions: HashMap::new(),
        tool_calls_so_far: 0,
        tools_offered: true,
        tree_tool_calls: u32::MAX,
        earlier: Vec::new(),
        semantics: RepeatSemantics::Observed,
    };
    if on("tree_tool_calls") {
        // A sub-agent whose tree has no tool call left.
        case.tree_tool_calls = 0;
    }
    if on("repeat_not_rerun") {
        // The same call ran before (its skill's count stays below any limit set below).
        case.semantics = RepeatSemantics::Pure;
        let slot = RoundJudge::slot(&case.judge, call(), case.semantics);
        let mut round = RoundJudge::default();
        round.observe(&mut case.judge, &slot, &ToolOutcome::ok("done"));
        case.judge.memory.calls_per_skill.clear();
    }
    if on("same_in_reply") {
        case.earlier
            .push(RoundJudge::slot(&case.judge, call(), case.semantics));
    }
    if on("skill_call_limit") {
        policy.max_calls_per_skill = Some(1);
        case.judge
            .memory
            .calls_per_skill
            .insert(FINISH_TOOL.to_owned(), 1);
    }
    if on("no_tools_offered") {
        case.tools_offered = false;
    }
    if on("withdrawn") && from != 2 {
        case.judge.memory.withdraw(
            FINISH_TOOL,
            "it kept failing".to_owned(),
            GuardKind::CircuitBreaker,
        );
    }
    if on("tool_call_limit") {
        case.tool_calls_so_far = 10;
    }
    if on("finish_call") {
        policy.finish_tool = true;
    }
    if on("unattended") {
        case.approval = ApprovalRules {
            mode: ApprovalMode::Never,
            skills: BTreeMap::from([(FINISH_TOOL.to_owned(), ApprovalMode::Always)]),
            unattended: true,
        };
    }
    if on("rejected") && from != 2 {
        case.decisions
            .insert("c1".to_owned(), Decision::Reject { reason: None });
    }
    if on("resent") {
        case.judge.memory.resent.insert(
            "c1".to_owned(),
            Resent {
                earlier: "c0".to_owned(),
                content: "done".to_owned(),
                is_error: false,
            },
        );
    }
    case.judge.policy = policy;
    case
}

/// The gate that decides the call in `case`, and the call's plan.
fn fired(mut case: Case) -> (Option<&'static str>, Plan) {
    let mut slot = RoundJudge::slot(&case.judge, call(), case.semantics);
    let facts = RoundFacts {
        tool_calls_so_far: case.tool_calls_so_far,
        tools_offered: case.tools_offered,
        approval: &case.approval,
        tree_tool_calls: case.tree_tool_calls,
    };
    let call = CallFacts::new(
        &case.judge,
        &slot,
        &case.earlier,
        0,
        &mut case.decisions,
        facts,
    );
    let mut round = RoundJudge::default();
    let mut trips = Vec::new();
    let gate = pass(&mut Gating {
        round: &mut round,
        judge: &mut case.judge,
        slot: &mut slot,
        call: &call,
        trips: &mut trips,
    });
    (gate, slot.plan)
}

#[test]
fn the_gates_are_asked_in_this_order() {
    let names: Vec<&str> = GATES.iter().map(|g| g.name).collect();
    assert_eq!(
        names,
        [
            "resent",
            "rejected",
            "unattended",
            "finish_call",
            "tool_call_limit",
            "withdrawn",
            "no_tools_offered",
            "skill_call_limit",
            "same_in_reply",
            "repeat_not_rerun",
            "tree_tool_calls",
        ]
    );
}

#[test]
fn a_call_no_gate_stops_runs() {
    assert_eq!(fired(case(GATES.len())), (None, Plan::Run));
}

/// Gate `i` fires while the conditions of every gate after it hold too.
fn fires_before_the_rest(i: usize) {
    let (gate, plan) = fired(case(i));
    assert_eq!(gate, Some(GATES[i].name));
    assert_ne!(plan, Plan::Run, "{} decided the call", GATES[i].name);
}

#[test]
fn resent_fires_first() {
    fires_before_the_rest(0);
    assert_eq!(
        fired(case(0)).1,
        Plan::Answer {
            content: "done".to_owned(),
            is_error: false
        }
    );
}

#[test]
fn rejected_fires_before_the_rest() {
    fires_before_the_rest(1);
}

#[test]
fn unattended_fires_before_the_rest() {
    fires_before_the_rest(2);
}

#[test]
fn finish_call_fires_before_the_rest() {
    fires_before_the_rest(3);
}

#[test]
fn tool_call_limit_fires_before_the_rest() {
    fires_before_the_rest(4);
}

#[test]
fn withdrawn_fires_before_the_rest() {
    fires_before_the_rest(5);
}

#[test]
fn no_tools_offered_fires_before_the_rest() {
    fires_before_the_rest(6);
}

#[test]
fn skill_call_limit_fires_before_the_rest() {
    fires_before_the_rest(7);
}

#[test]
fn same_in_reply_fires_before_the_rest() {
    fires_before_the_rest(8);
    assert_eq!(fired(case(8)).1, Plan::SameAs(0));
}

#[test]
fn repeat_not_rerun_fires_last() {
    fires_before_the_rest(9);
}

#[test]
fn tree_tool_calls_fires_last_for_a_call_that_would_run() {
    fires_before_the_rest(10);
    assert_eq!(
        fired(case(10)).1,
        Plan::Answer {
            content: crate::words::not_run::TREE_TOOL_CALLS.to_owned(),
            is_error: true
        }
    );
}
