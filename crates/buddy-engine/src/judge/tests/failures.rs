//! Failures: the circuit breaker, rounds that bring nothing new, fix cycles, junk arguments.
//! A new action is progress even when it fails; the same failure again is not.

use super::*;

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
fn new_actions_that_fail_are_progress_however_alike_their_failures() {
    let policy = quiet(LoopPolicy {
        max_stale_rounds: Some(3),
        max_consecutive_failures: 100,
        ..LoopPolicy::default()
    });
    let mut turn = Turn::new(policy);
    let fail = |_: &ToolCall| ToolOutcome::error("invalid arguments");
    for n in 0..9 {
        let tool = ["search", "read", "status"][n % 3];
        let seen = turn.round(
            vec![(tool, json!({"n": n}))],
            RepeatSemantics::Observed,
            &fail,
        );
        assert_eq!(seen.verdict.cause, None, "{tool} {n}");
    }
}

#[test]
fn the_same_failing_call_again_and_again_ends_the_turn() {
    let policy = quiet(LoopPolicy {
        max_consecutive_failures: 100,
        ..LoopPolicy::default()
    });
    let mut turn = Turn::new(policy);
    let fail = |_: &ToolCall| ToolOutcome::error("connection refused");
    let mut stops = Vec::new();
    for _ in 0..8 {
        let seen = turn.round(
            vec![("read", json!({"url": "https://example.com"}))],
            RepeatSemantics::Observed,
            &fail,
        );
        stops.push(seen.stop());
    }
    let mut expected = vec![None; 7];
    expected.push(Some((StopReason::LoopDetected, GuardKind::Repetition)));
    assert_eq!(stops, expected, "warned at the fifth, ended at the eighth");
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
fn junk_arguments_failing_each_their_own_way_are_new_actions() {
    let policy = quiet(LoopPolicy {
        max_stale_rounds: Some(2),
        max_consecutive_failures: 100,
        ..LoopPolicy::default()
    });
    let mut turn = Turn::new(policy);
    let rounds = [
        ("/abs/path.txt", "path is absolute; use a relative path"),
        ("to file.txt", "No such file or directory (os error 2)"),
        ("file.txt&#34", "not valid JSON"),
        ("x/../../y", "path escapes the sandbox"),
        (
            "report.txt",
            "not found; did you mean quarterly_figures.txt?",
        ),
        ("quarterly_figures.txt", "permission denied"),
    ];
    // A model that tries something it has not tried is working, even when every try
    // fails: a false stop loses the task, a missed loop costs calls the caps bound.
    for (path, error) in rounds {
        let seen = turn.round(
            vec![("search", json!({"path": path}))],
            RepeatSemantics::Observed,
            &move |_| ToolOutcome::error(error),
        );
        assert_eq!(seen.stop(), None, "{path}");
    }
}

#[test]
fn rounds_of_calls_answered_without_running_bring_nothing_new() {
    let policy = quiet(LoopPolicy {
        max_stale_rounds: Some(3),
        ..LoopPolicy::default()
    });
    let mut turn = Turn::new(policy);
    let mut stops = Vec::new();
    for n in 0..3 {
        let id = format!("c{}", turn.next_id + 1);
        let rejected = HashMap::from([(id, Decision::Reject { reason: None })]);
        let seen = turn.round_with(
            "",
            vec![("write", json!({"n": n}))],
            RepeatSemantics::Effectful,
            rejected,
            &same("wrote"),
        );
        stops.push(seen.stop());
    }
    assert_eq!(
        stops,
        [
            None,
            None,
            Some((StopReason::ToolsExhausted, GuardKind::NoProgress))
        ]
    );
}
