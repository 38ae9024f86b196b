//! Limits, approval, the trip budget, withdrawn tools and the memory.

use super::*;

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
    let back: crate::judge::memory::JudgeMemory = serde_json::from_str(&json).expect("reads back");
    assert_eq!(serde_json::to_string(&back).expect("again"), json);
    assert_eq!(back.log.len(), 1);
    assert_eq!(back.ladder.total(), 1);
}

#[test]
fn an_unattended_refusal_withdraws_the_skill_and_calling_it_again_finalizes() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    turn.approval = ApprovalRules {
        mode: ApprovalMode::Destructive,
        unattended: true,
        ..ApprovalRules::default()
    };
    let first = turn.round(
        vec![("write", json!({"path": "a.php"}))],
        RepeatSemantics::Effectful,
        &same("wrote"),
    );
    assert_eq!(first.stop(), None);
    assert!(turn.judge.memory.is_withdrawn("write"));
    // Other arguments do not help: it cannot run in this turn.
    let second = turn.round(
        vec![("write", json!({"path": "b.php"}))],
        RepeatSemantics::Effectful,
        &same("wrote"),
    );
    assert_eq!(
        second.stop(),
        Some((StopReason::ToolsExhausted, GuardKind::WithdrawnSkillCalled))
    );
}

#[test]
fn tools_declined_for_want_of_approval_leave_the_model_to_answer() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    turn.tools = vec!["write".into()];
    turn.approval = ApprovalRules {
        mode: ApprovalMode::Destructive,
        unattended: true,
        ..ApprovalRules::default()
    };
    let seen = turn.round(
        vec![("write", json!({"path": "a.php"}))],
        RepeatSemantics::Effectful,
        &same("wrote"),
    );
    // Its only tool is declined, not failed: no Finalize, the next call has no tools.
    assert_eq!(seen.stop(), None);
    assert!(turn.judge.memory.is_withdrawn("write"));
}
