//! Repeats: the same call again, polls, cycles, flip-flops, near-duplicates and echoes.

use super::*;

#[test]
fn an_observed_skill_may_return_the_same_result_four_times_the_fifth_warns_the_eighth_finalizes() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    for look in 1..=7 {
        let seen = turn.round(
            vec![("status", json!({"job": 7}))],
            RepeatSemantics::Observed,
            &same("running"),
        );
        assert_eq!(seen.verdict.cause, None, "look {look}");
        if look == 5 {
            assert_eq!(
                seen.guards(),
                [(GuardKind::Repetition, GuardAction::Warned)]
            );
            let note = seen.verdict.notes.join("\n");
            assert!(
                note.contains("5 times in a row") && note.contains("\"running\""),
                "the note names the repeat and its evidence: {note}"
            );
            assert!(
                note.contains("3 more times"),
                "and when the end comes: {note}"
            );
        } else {
            assert!(seen.trips.is_empty(), "look {look}: {:?}", seen.trips);
        }
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
fn a_cycle_of_the_same_calls_and_results_ends_when_a_member_runs_out_of_patience() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let weather = || vec![("search", json!({"q": "weather"}))];
    let forecast = || vec![("read", json!({"q": "forecast"}))];
    // Two calls in turn with the same answers are also two jobs polled in turn: each may
    // look four times (a look again after something new was done is checking anew, and
    // counts nothing); the fourth time round with nothing new is warned, the fifth ends.
    for round in 1..=9 {
        let (calls, result) = if round % 2 == 1 {
            (weather(), "rain")
        } else {
            (forecast(), "sun")
        };
        let seen = turn.round(calls, RepeatSemantics::Observed, &same(result));
        assert!(seen.verdict.cause.is_none(), "round {round}: {seen:?}");
        if round == 8 {
            assert_eq!(seen.guards(), [(GuardKind::Cycle, GuardAction::Warned)]);
        } else {
            assert!(seen.trips.is_empty(), "round {round}: {seen:?}");
        }
    }
    let tenth = turn.round(forecast(), RepeatSemantics::Observed, &same("sun"));
    assert_eq!(
        tenth.stop(),
        Some((StopReason::LoopDetected, GuardKind::Cycle))
    );
}

#[test]
fn a_check_after_new_work_is_no_repeat_whatever_it_returns() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let fixes = [
        "return a + b",
        "return b + a",
        "return sum([a, b])",
        "return a - -b",
        "return int(a) + int(b)",
        "return float(a) + b",
        "return a.__add__(b)",
        "return (a or 0) + (b or 0)",
        "return functools.reduce(add, [a, b])",
        "return a + b if b else a",
        "return add(a, b)",
        "return operator.add(a, b)",
    ];
    for (attempt, fix) in fixes.iter().enumerate() {
        let write = turn.round(
            vec![(
                "write",
                json!({"path": "fix.py", "content": format!("def add(a, b):\n    {fix}\n")}),
            )],
            RepeatSemantics::Observed,
            &same("ok"),
        );
        let test = turn.round(
            vec![("status", json!({"run": "tests"}))],
            RepeatSemantics::Observed,
            &same("FAILED test_fix: expected 3, got 2"),
        );
        for seen in [&write, &test] {
            assert!(
                seen.trips.is_empty() && seen.verdict.cause.is_none(),
                "attempt {attempt}: {seen:?}"
            );
        }
    }
}

#[test]
fn new_actions_are_progress_whatever_they_return() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let commands = [
        "ls -la",
        "mkdir reproduce_issue",
        "mkdir myapp && touch myapp/__init__.py",
        "cat <<'EOF' > settings.py\nSECRET_KEY = 'x'\nEOF",
        "cat <<'EOF' > models.py\nfrom django.db import models\nEOF",
        "cd reproduce_issue",
        "touch README",
        "git status --short",
    ];
    for (n, command) in commands.iter().enumerate() {
        for result in ["", "ok", "None"] {
            let seen = turn.round(
                vec![("write", json!({"command": format!("{command} # {result}")}))],
                RepeatSemantics::Observed,
                &same(result),
            );
            assert!(
                seen.trips.is_empty() && seen.verdict.cause.is_none(),
                "{n} {command:?} -> {result:?}: {seen:?}"
            );
        }
    }
}

#[test]
fn two_jobs_polled_in_turn_finish_within_patience() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    for look in 1..=5 {
        for job in [1, 2] {
            let state = if look == 5 { "done" } else { "running" };
            let seen = turn.round(
                vec![("status", json!({"job": job}))],
                RepeatSemantics::Observed,
                &same(state),
            );
            assert!(
                seen.verdict.cause.is_none(),
                "look {look} at job {job}: {seen:?}"
            );
            // Four times round with nothing new looks like a cycle: a note, no end.
            if (look, job) == (4, 2) {
                assert_eq!(seen.guards(), [(GuardKind::Cycle, GuardAction::Warned)]);
            } else {
                assert!(seen.trips.is_empty(), "look {look} at job {job}: {seen:?}");
            }
        }
    }
}

#[test]
fn near_duplicates_trip_on_the_fifth_call_whose_result_only_echoes() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let echo = |call: &ToolCall| {
        let query: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
        ToolOutcome::ok(format!(
            "No results for '{}'.",
            query["q"].as_str().unwrap_or_default()
        ))
    };
    let queries = [
        "libfoo changelog",
        "libfoo changelog 0.4",
        "libfoo changelog 0.4 release",
        "libfoo changelog 0.4 release notes",
    ];
    for query in queries {
        let seen = turn.round(
            vec![("search", json!({ "q": query }))],
            RepeatSemantics::Observed,
            &echo,
        );
        assert!(seen.trips.is_empty(), "{query}: {:?}", seen.trips);
    }
    let fifth = turn.round(
        vec![(
            "search",
            json!({"q": "libfoo changelog 0.4 release notes github"}),
        )],
        RepeatSemantics::Observed,
        &echo,
    );
    assert_eq!(
        fifth.guards(),
        [(GuardKind::NearDuplicate, GuardAction::Warned)]
    );
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
    for n in 1..=7 {
        let seen = turn.round(
            vec![("status", json!({"build": "b-1"}))],
            RepeatSemantics::Observed,
            &pending(n),
        );
        assert!(seen.verdict.cause.is_none(), "look {n}");
        assert_eq!(
            seen.trips.is_empty(),
            n != 5,
            "look {n}: warned at the fifth"
        );
    }
    let eighth = turn.round(
        vec![("status", json!({"build": "b-1"}))],
        RepeatSemantics::Observed,
        &pending(8),
    );
    assert_eq!(
        eighth.stop(),
        Some((StopReason::LoopDetected, GuardKind::Repetition))
    );
}

#[test]
fn values_that_flip_between_a_few_states_are_a_loop() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let states = ["running", "queued", "running", "queued", "running"];
    for state in states {
        let seen = turn.round(
            vec![("status", json!({"job": 1}))],
            RepeatSemantics::Observed,
            &move |_| ToolOutcome::ok(state),
        );
        assert!(seen.verdict.cause.is_none(), "{state}");
    }
    // The sixth answer is the fourth in a row that says nothing it had not said before:
    // a note; the ninth (the seventh in a row) ends the turn.
    let sixth = turn.round(
        vec![("status", json!({"job": 1}))],
        RepeatSemantics::Observed,
        &same("queued"),
    );
    assert_eq!(
        sixth.guards(),
        [(GuardKind::Repetition, GuardAction::Warned)]
    );
    for state in ["running", "queued"] {
        let seen = turn.round(
            vec![("status", json!({"job": 1}))],
            RepeatSemantics::Observed,
            &same(state),
        );
        assert!(seen.verdict.cause.is_none(), "{state}");
    }
    let ninth = turn.round(
        vec![("status", json!({"job": 1}))],
        RepeatSemantics::Observed,
        &same("running"),
    );
    assert_eq!(
        ninth.stop(),
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
    // A query that only grows word by word, carrying nothing the results said, is an
    // echo: the fifth trips.
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    let mut last = None;
    for n in 0..5 {
        last = Some(turn.round(
            vec![(
                "search",
                json!({"query": format!("the checklist{}", " step".repeat(n))}),
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
            vec![("search", json!({"q": "weather"}))],
            RepeatSemantics::Observed,
            HashMap::new(),
            &same("a"),
        );
        assert!(first.trips.is_empty());
        let second = turn.round_with(
            text,
            vec![("search", json!({"q": "weather today"}))],
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
fn the_same_answer_beside_a_new_action_is_narration_not_a_loop() {
    let policy = quiet(LoopPolicy {
        repeated_answer_min_chars: 20,
        ..LoopPolicy::default()
    });
    let text = "The changes look good. Now let's run the script again to see.";
    let mut turn = Turn::new(policy);
    for path in ["a.py", "b.py", "c.py", "d.py", "e.py"] {
        let seen = turn.round_with(
            text,
            vec![("read", json!({"path": path}))],
            RepeatSemantics::Observed,
            HashMap::new(),
            &same("ok"),
        );
        assert!(seen.trips.is_empty(), "{path}: {:?}", seen.trips);
    }
}
