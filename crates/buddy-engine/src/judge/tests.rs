//! The judge, rule by rule, at each rule's boundary: one short of the threshold passes,
//! the threshold trips. No provider, no toolbox: rounds are fed to the judge directly.

use std::collections::HashMap;

use buddy_core::{GuardAction, GuardKind, RepeatSemantics, StopReason, ToolCall, ToolOutcome};
use serde_json::json;

use super::memory::Judge;
use super::round::{Plan, RoundFacts, RoundJudge, RoundVerdict};
use super::verdict::Trip;
use crate::approval::{ApprovalMode, ApprovalRules, Decision};
use crate::policy::LoopPolicy;

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
        };
        let (slots, mut trips) =
            round.plan(&mut self.judge, calls, &semantics, &mut decisions, facts);
        for slot in &slots {
            if slot.plan == Plan::Run {
                self.tool_calls += 1;
                let outcome = result(&slot.call);
                trips.extend(round.observe(&mut self.judge, slot, &outcome));
            }
        }
        let names: Vec<&str> = self.tools.iter().map(String::as_str).collect();
        let verdict = round.end(&mut self.judge, text, false, self.model_calls, &names);
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

#[test]
fn an_observed_skill_may_return_the_same_result_three_times_the_fourth_finalizes() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    for look in 1..=3 {
        let seen = turn.round(
            vec![("status", json!({"job": 7}))],
            RepeatSemantics::Observed,
            &same("running"),
        );
        assert!(seen.trips.is_empty(), "look {look}: {:?}", seen.trips);
        assert_eq!(seen.verdict.cause, None, "look {look}");
    }
    let seen = turn.round(
        vec![("status", json!({"job": 7}))],
        RepeatSemantics::Observed,
        &same("running"),
    );
    assert_eq!(
        seen.stop(),
        Some((StopReason::LoopDetected, GuardKind::Repetition))
    );
}

#[test]
fn a_changed_result_is_progress_for_an_observed_skill() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    for n in 0..10 {
        let seen = turn.round(
            vec![("status", json!({"job": 7}))],
            RepeatSemantics::Observed,
            &move |_| ToolOutcome::ok(format!("{{\"n\":{n}}}")),
        );
        assert!(
            seen.trips.is_empty() && seen.verdict.cause.is_none(),
            "{n}: {seen:?}"
        );
    }
}

#[test]
fn a_pure_repeat_is_answered_from_the_earlier_result_then_finalizes() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let first = turn.round(
        vec![("read", json!({"path": "a"}))],
        RepeatSemantics::Pure,
        &same("alpha"),
    );
    assert_eq!(first.plans, [Plan::Run]);
    let second = turn.round(
        vec![("read", json!({"path": "a"}))],
        RepeatSemantics::Pure,
        &same("never run"),
    );
    assert_eq!(
        second.plans,
        [Plan::Answer {
            content: "alpha".into(),
            is_error: false
        }]
    );
    assert_eq!(
        second.guards(),
        [(GuardKind::Repetition, GuardAction::ReturnedEarlierResult)]
    );
    assert!(
        second
            .verdict
            .notes
            .iter()
            .any(|n| n.contains("not run again"))
    );
    let third = turn.round(
        vec![("read", json!({"path": "a"}))],
        RepeatSemantics::Pure,
        &same("never run"),
    );
    assert_eq!(
        third.stop(),
        Some((StopReason::LoopDetected, GuardKind::Repetition))
    );
}

#[test]
fn a_pollable_skill_waits_out_its_patience() {
    let policy = quiet(LoopPolicy {
        poll_patience: 2,
        ..LoopPolicy::default()
    });
    let mut turn = Turn::new(policy);
    // The first call, then `poll_patience` unchanged results: nothing.
    for _ in 0..3 {
        let seen = turn.round(
            vec![("status", json!({}))],
            RepeatSemantics::Pollable,
            &same("pending"),
        );
        assert!(seen.trips.is_empty(), "{:?}", seen.trips);
    }
    let seen = turn.round(
        vec![("status", json!({}))],
        RepeatSemantics::Pollable,
        &same("pending"),
    );
    assert_eq!(
        seen.guards(),
        [(GuardKind::Repetition, GuardAction::Warned)]
    );
}

#[test]
fn a_cycle_is_signalled_when_a_call_comes_back_with_the_same_result() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let weather = || vec![("search", json!({"q": "weather"}))];
    let forecast = || vec![("read", json!({"q": "forecast"}))];
    assert!(
        turn.round(weather(), RepeatSemantics::Observed, &same("rain"))
            .trips
            .is_empty()
    );
    assert!(
        turn.round(forecast(), RepeatSemantics::Observed, &same("sun"))
            .trips
            .is_empty()
    );
    let third = turn.round(weather(), RepeatSemantics::Observed, &same("rain"));
    assert_eq!(third.guards(), [(GuardKind::Cycle, GuardAction::Warned)]);
    let fourth = turn.round(forecast(), RepeatSemantics::Observed, &same("sun"));
    assert_eq!(
        fourth.guards(),
        [
            (GuardKind::Cycle, GuardAction::WithdrewSkill),
            (GuardKind::Cycle, GuardAction::WithdrewSkill)
        ],
        "the ladder's second rung withdraws both members"
    );
}

#[test]
fn near_duplicates_trip_on_the_third_call_whose_result_only_echoes() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let echo = |call: &ToolCall| {
        let query: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
        ToolOutcome::ok(format!(
            "No results for '{}'.",
            query["q"].as_str().unwrap_or_default()
        ))
    };
    for attempt in 1..=2 {
        let seen = turn.round(
            vec![(
                "search",
                json!({"q": format!("libfoo changelog attempt {attempt}")}),
            )],
            RepeatSemantics::Observed,
            &echo,
        );
        assert!(seen.trips.is_empty(), "attempt {attempt}: {:?}", seen.trips);
    }
    let third = turn.round(
        vec![("search", json!({"q": "libfoo changelog attempt 3"}))],
        RepeatSemantics::Observed,
        &echo,
    );
    assert_eq!(
        third.guards(),
        [(GuardKind::NearDuplicate, GuardAction::Warned)]
    );
}

#[test]
fn the_circuit_breaker_withdraws_a_skill_at_its_failure_count() {
    let policy = quiet(LoopPolicy {
        max_consecutive_failures: 3,
        max_stale_rounds: None,
        ..LoopPolicy::default()
    });
    let mut turn = Turn::new(policy);
    let fail = |_: &ToolCall| ToolOutcome::error("connection refused");
    for n in 1..=2 {
        let seen = turn.round(
            vec![("read", json!({"url": n}))],
            RepeatSemantics::Observed,
            &fail,
        );
        assert!(seen.trips.is_empty(), "failure {n}: {:?}", seen.trips);
    }
    let third = turn.round(
        vec![("read", json!({"url": 3}))],
        RepeatSemantics::Observed,
        &fail,
    );
    assert_eq!(
        third.guards(),
        [(GuardKind::CircuitBreaker, GuardAction::WithdrewSkill)]
    );
    assert!(turn.judge.memory.is_withdrawn("read"));
    // A call to the withdrawn skill is not run and goes straight to Finalize.
    let fourth = turn.round(
        vec![("read", json!({"url": 4}))],
        RepeatSemantics::Observed,
        &fail,
    );
    assert!(matches!(
        fourth.plans[0],
        Plan::Answer { is_error: true, .. }
    ));
    assert_eq!(
        fourth.stop(),
        Some((StopReason::ToolsExhausted, GuardKind::WithdrawnSkillCalled))
    );
}

#[test]
fn a_success_resets_the_failure_count() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    for n in 0..6 {
        let outcome = move |_: &ToolCall| {
            if n % 3 == 2 {
                ToolOutcome::ok(format!("page {n}"))
            } else {
                ToolOutcome::error(format!("timeout {n}"))
            }
        };
        let seen = turn.round(
            vec![("read", json!({"n": n}))],
            RepeatSemantics::Observed,
            &outcome,
        );
        assert!(
            !seen
                .guards()
                .contains(&(GuardKind::CircuitBreaker, GuardAction::WithdrewSkill)),
            "{n}"
        );
    }
}

#[test]
fn no_progress_ends_the_turn_after_max_stale_rounds() {
    let policy = quiet(LoopPolicy {
        max_stale_rounds: Some(3),
        max_consecutive_failures: 100,
        ..LoopPolicy::default()
    });
    let mut turn = Turn::new(policy);
    let fail = |_: &ToolCall| ToolOutcome::error("invalid arguments");
    let tools = ["search", "read", "status"];
    // The first failure of each skill says something new.
    for (n, tool) in tools.iter().enumerate() {
        let seen = turn.round(
            vec![(tool, json!({"n": n}))],
            RepeatSemantics::Observed,
            &fail,
        );
        assert_eq!(seen.verdict.cause, None, "first failure of {tool}");
    }
    // The same failures again bring nothing: two stale rounds pass, the third trips.
    for (n, tool) in tools.iter().enumerate().take(2) {
        let seen = turn.round(
            vec![(tool, json!({"n": n + 10}))],
            RepeatSemantics::Observed,
            &fail,
        );
        assert_eq!(seen.verdict.cause, None, "stale round {}", n + 1);
    }
    let third = turn.round(
        vec![("status", json!({"n": 99}))],
        RepeatSemantics::Observed,
        &fail,
    );
    assert_eq!(
        third.stop(),
        Some((StopReason::ToolsExhausted, GuardKind::NoProgress))
    );
}

#[test]
fn a_failure_with_a_new_message_is_progress_so_a_fix_cycle_goes_on() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let errors = [
        "FAILED test_add: expected 3, got -1",
        "FAILED test_add: TypeError: unsupported operand",
        "FAILED test_add: expected 3, got 33",
        "FAILED test_add: NameError: name 'c' is not defined",
    ];
    for (n, error) in errors.iter().enumerate() {
        let write = turn.round(
            vec![(
                "write",
                json!({"path": "calc.py", "content": format!("def add(a, b): return a {n} b")}),
            )],
            RepeatSemantics::Observed,
            &same("wrote 41 bytes"),
        );
        let check = turn.round(
            vec![("status", json!({}))],
            RepeatSemantics::Observed,
            &move |_| ToolOutcome::error(*error),
        );
        for seen in [&write, &check] {
            assert!(
                seen.trips.is_empty() && seen.verdict.cause.is_none(),
                "attempt {n}: {seen:?}"
            );
        }
    }
}

#[test]
fn a_poll_whose_answers_differ_only_in_timestamps_and_ids_is_a_loop() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let pending = |n: u32| {
        move |_: &ToolCall| {
            ToolOutcome::ok(format!(
                "pending (checked at 2025-01-01T12:00:{:02}Z, check {n}, request 3f2a9c{n:02}-9d4e-4c1b-8a2f-0051c0ffee{n:02})",
                n * 7 % 60
            ))
        }
    };
    for n in 1..=3 {
        let seen = turn.round(
            vec![("status", json!({"build": "b-1"}))],
            RepeatSemantics::Observed,
            &pending(n),
        );
        assert!(
            seen.trips.is_empty() && seen.verdict.cause.is_none(),
            "look {n}"
        );
    }
    let fourth = turn.round(
        vec![("status", json!({"build": "b-1"}))],
        RepeatSemantics::Observed,
        &pending(4),
    );
    assert_eq!(
        fourth.stop(),
        Some((StopReason::LoopDetected, GuardKind::Repetition))
    );
}

#[test]
fn values_that_flip_between_a_few_states_are_a_loop() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let states = ["running", "queued", "running", "queued"];
    for state in states {
        let seen = turn.round(
            vec![("status", json!({"job": 1}))],
            RepeatSemantics::Observed,
            &move |_| ToolOutcome::ok(state),
        );
        assert!(seen.verdict.cause.is_none(), "{state}");
    }
    // The fifth answer is the third in a row that says nothing it had not said before.
    let fifth = turn.round(
        vec![("status", json!({"job": 1}))],
        RepeatSemantics::Observed,
        &same("running"),
    );
    assert_eq!(
        fifth.stop(),
        Some((StopReason::LoopDetected, GuardKind::Repetition))
    );
}

#[test]
fn arguments_that_carry_what_the_latest_results_said_are_no_echo() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let echo = |call: &ToolCall| {
        let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
        ToolOutcome::ok(format!(
            "Results for '{}': 1 page found.",
            args["query"].as_str().unwrap_or_default()
        ))
    };
    let tickets = ["48213907", "90211734", "31770592", "66102348", "12987443"];
    for (n, ticket) in tickets.iter().enumerate() {
        let read = turn.round(
            vec![("read", json!({"url": format!("/checklist/{n}")}))],
            RepeatSemantics::Observed,
            &move |_| ToolOutcome::ok(*ticket),
        );
        let search = turn.round(
            vec![(
                "search",
                json!({"query": format!("step {n} after {ticket}")}),
            )],
            RepeatSemantics::Observed,
            &echo,
        );
        for seen in [&read, &search] {
            assert!(
                seen.trips.is_empty() && seen.verdict.cause.is_none(),
                "step {n}: {seen:?}"
            );
        }
    }
    // The same queries without the tickets are echoes: the third trips.
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let mut last = None;
    for n in 0..3 {
        last = Some(turn.round(
            vec![(
                "search",
                json!({"query": format!("step {n} of the checklist")}),
            )],
            RepeatSemantics::Observed,
            &echo,
        ));
    }
    assert_eq!(
        last.map(|s| s.guards()),
        Some(vec![(GuardKind::NearDuplicate, GuardAction::Warned)])
    );
}

#[test]
fn trips_on_different_skills_add_up_to_the_trip_budget() {
    let policy = quiet(LoopPolicy {
        max_guard_trips: 2,
        ..LoopPolicy::default()
    });
    let mut turn = Turn::new(policy);
    for tool in ["read", "write"] {
        turn.round(
            vec![(tool, json!({"x": 1}))],
            RepeatSemantics::Pure,
            &same("ok"),
        );
    }
    let first = turn.round(
        vec![("read", json!({"x": 1}))],
        RepeatSemantics::Pure,
        &same("ok"),
    );
    assert_eq!(first.verdict.cause, None, "one trip of two");
    let second = turn.round(
        vec![("write", json!({"x": 1}))],
        RepeatSemantics::Pure,
        &same("ok"),
    );
    assert_eq!(
        second.stop(),
        Some((StopReason::LoopDetected, GuardKind::TripBudget))
    );
}

#[test]
fn the_same_answer_text_beside_new_calls_is_signalled_from_its_minimum_length() {
    let policy = quiet(LoopPolicy {
        repeated_answer_min_chars: 20,
        ..LoopPolicy::default()
    });
    let short = "Nineteen characters";
    let long = "Twenty characters!!!";
    assert_eq!((short.chars().count(), long.chars().count()), (19, 20));
    for (text, trips) in [(short, false), (long, true)] {
        let mut turn = Turn::new(policy.clone());
        let first = turn.round_with(
            text,
            vec![("search", json!({"q": 1}))],
            RepeatSemantics::Observed,
            HashMap::new(),
            &same("a"),
        );
        assert!(first.trips.is_empty());
        let second = turn.round_with(
            text,
            vec![("search", json!({"q": 2}))],
            RepeatSemantics::Observed,
            HashMap::new(),
            &same("b"),
        );
        assert_eq!(
            second
                .guards()
                .contains(&(GuardKind::RepeatedAnswer, GuardAction::Warned)),
            trips,
            "{text:?}"
        );
    }
}

#[test]
fn the_tool_call_limit_refuses_the_call_that_would_exceed_it() {
    let policy = LoopPolicy {
        max_tool_calls: 3,
        ..quiet(LoopPolicy::default())
    };
    let policy = LoopPolicy {
        max_tool_calls: 3,
        ..policy
    };
    let mut turn = Turn::new(policy);
    let calls = (0..4).map(|n| ("search", json!({"q": n}))).collect();
    let seen = turn.round(calls, RepeatSemantics::Observed, &|c| {
        ToolOutcome::ok(c.arguments.clone())
    });
    assert_eq!(&seen.plans[..3], [Plan::Run, Plan::Run, Plan::Run]);
    assert!(matches!(seen.plans[3], Plan::Answer { is_error: true, .. }));
    assert_eq!(
        seen.stop(),
        Some((StopReason::MaxToolCalls, GuardKind::ToolCallLimit))
    );
}

#[test]
fn the_per_skill_limit_withdraws_the_skill_at_its_limit() {
    let policy = quiet(LoopPolicy {
        max_calls_per_skill: Some(2),
        ..LoopPolicy::default()
    });
    let mut turn = Turn::new(policy);
    let calls = (0..3).map(|n| ("search", json!({"q": n}))).collect();
    let seen = turn.round(calls, RepeatSemantics::Observed, &|c| {
        ToolOutcome::ok(c.arguments.clone())
    });
    assert_eq!(&seen.plans[..2], [Plan::Run, Plan::Run]);
    assert!(matches!(seen.plans[2], Plan::Answer { is_error: true, .. }));
    assert_eq!(
        seen.guards(),
        [(GuardKind::SkillCallLimit, GuardAction::WithdrewSkill)]
    );
}

#[test]
fn the_same_call_twice_in_one_response_runs_once_and_a_parallel_batch_is_no_loop() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let seen = turn.round(
        vec![("read", json!({"p": 1})), ("read", json!({"p": 1}))],
        RepeatSemantics::Observed,
        &same("x"),
    );
    assert_eq!(seen.plans, [Plan::Run, Plan::SameAs(0)]);
    let batch = (0..12).map(|n| ("search", json!({"ticker": n}))).collect();
    let seen = turn.round(batch, RepeatSemantics::Observed, &same("no trades today"));
    assert!(
        seen.trips.is_empty() && seen.verdict.cause.is_none(),
        "{seen:?}"
    );
}

#[test]
fn unattended_calls_that_need_approval_are_refused_and_rejections_say_why() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    turn.approval = ApprovalRules {
        mode: ApprovalMode::Destructive,
        unattended: true,
        ..ApprovalRules::default()
    };
    let seen = turn.round(
        vec![("write", json!({"p": 1}))],
        RepeatSemantics::Effectful,
        &same("wrote"),
    );
    assert!(
        matches!(&seen.plans[0], Plan::Answer { content, is_error: true } if content.contains("approval"))
    );
    assert_eq!(seen.guards(), [(GuardKind::Approval, GuardAction::Refused)]);

    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let id = format!("c{}", turn.next_id + 1);
    let decisions = HashMap::from([(
        id,
        Decision::Reject {
            reason: Some("not now".into()),
        },
    )]);
    let seen = turn.round_with(
        "",
        vec![("write", json!({}))],
        RepeatSemantics::Effectful,
        decisions,
        &same("wrote"),
    );
    assert!(matches!(&seen.plans[0], Plan::Answer { content, .. } if content.ends_with("not now")));
}

#[test]
fn every_tool_withdrawn_finalizes() {
    let policy = quiet(LoopPolicy {
        max_consecutive_failures: 1,
        max_guard_trips: 100,
        ..LoopPolicy::default()
    });
    let mut turn = Turn::new(policy);
    turn.tools = vec!["read".into()];
    let seen = turn.round(
        vec![("read", json!({}))],
        RepeatSemantics::Observed,
        &|_| ToolOutcome::error("down"),
    );
    assert_eq!(
        seen.stop(),
        Some((StopReason::ToolsExhausted, GuardKind::CircuitBreaker))
    );
}

#[test]
fn the_budget_note_starts_at_half_the_model_calls() {
    let policy = LoopPolicy {
        max_model_calls: 6,
        ..LoopPolicy::default()
    };
    let mut turn = Turn::new(policy);
    for n in 1..=3 {
        let seen = turn.round(
            vec![("search", json!({"n": n}))],
            RepeatSemantics::Observed,
            &move |_| ToolOutcome::ok(format!("r{n}")),
        );
        let noted = seen
            .verdict
            .notes
            .iter()
            .any(|m| m.contains("model calls left"));
        assert_eq!(noted, n == 3, "after model call {n}");
    }
}

#[test]
fn loop_detection_off_keeps_only_limits_and_the_breaker() {
    let policy = quiet(LoopPolicy {
        loop_detection: false,
        ..LoopPolicy::default()
    });
    let mut turn = Turn::new(policy);
    for _ in 0..8 {
        let seen = turn.round(
            vec![("read", json!({}))],
            RepeatSemantics::Pure,
            &same("same"),
        );
        assert!(seen.trips.is_empty() && seen.verdict.cause.is_none());
    }
}

#[test]
fn the_memory_is_plain_data() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    turn.round(
        vec![("read", json!({"p": 1}))],
        RepeatSemantics::Pure,
        &same("x"),
    );
    turn.round(
        vec![("read", json!({"p": 1}))],
        RepeatSemantics::Pure,
        &same("x"),
    );
    let json = serde_json::to_string(&turn.judge.memory).expect("serialises");
    let back: super::memory::JudgeMemory = serde_json::from_str(&json).expect("reads back");
    assert_eq!(serde_json::to_string(&back).expect("again"), json);
    assert_eq!(back.log.len(), 1);
    assert_eq!(back.ladder.total(), 1);
}
