//! Failures: the circuit breaker, rounds that bring nothing new, fix cycles, junk arguments.

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
fn junk_arguments_that_fail_each_their_own_way_end_after_max_stale_rounds() {
    let policy = quiet(LoopPolicy {
        max_stale_rounds: Some(3),
        max_consecutive_failures: 100,
        ..LoopPolicy::default()
    });
    let mut turn = Turn::new(policy);
    let failures = [
        ("/abs/path.txt", "path is absolute; use a relative path"),
        ("to file.txt", "No such file or directory (os error 2)"),
        ("file.txt&#34", "not valid JSON"),
        ("x/../../y", "path escapes the sandbox"),
    ];
    let mut stops = Vec::new();
    for (path, error) in failures {
        let seen = turn.round(
            vec![("search", json!({"path": path}))],
            RepeatSemantics::Observed,
            &move |_| ToolOutcome::error(error),
        );
        stops.push(seen.stop());
    }
    // The skill's first failure tells something; then three rounds of new messages the
    // model did not get from anything it read: the third ends the turn.
    assert_eq!(
        stops,
        [
            None,
            None,
            None,
            Some((StopReason::ToolsExhausted, GuardKind::NoProgress))
        ]
    );
}

#[test]
fn a_failure_whose_arguments_follow_the_latest_results_is_progress() {
    let policy = quiet(LoopPolicy {
        max_stale_rounds: Some(2),
        max_consecutive_failures: 100,
        ..LoopPolicy::default()
    });
    let mut turn = Turn::new(policy);
    let rounds = [
        ("report.txt", "not found"),
        (
            "reports.txt",
            "not found; did you mean quarterly_figures.txt?",
        ),
        // Follows the hint it read: working on the results, not junk.
        ("quarterly_figures.txt", "permission denied"),
        ("other.txt", "no such file"),
    ];
    for (path, error) in rounds {
        let seen = turn.round(
            vec![("read", json!({"path": path}))],
            RepeatSemantics::Observed,
            &move |_| ToolOutcome::error(error),
        );
        assert_eq!(seen.stop(), None, "{path}");
    }
    // One more junk failure makes two stale rounds in a row.
    let seen = turn.round(
        vec![("read", json!({"path": "junk"}))],
        RepeatSemantics::Observed,
        &|_| ToolOutcome::error("bad path"),
    );
    assert_eq!(
        seen.stop(),
        Some((StopReason::ToolsExhausted, GuardKind::NoProgress))
    );
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
