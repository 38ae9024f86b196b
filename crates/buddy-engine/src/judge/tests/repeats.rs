//! Repeats: the same call again, polls, cycles, flip-flops, near-duplicates and echoes.

use super::*;

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
    // Each withdrawal names its own tool first: the member that did not close the cycle
    // is told apart from the call that did.
    for trip in &fourth.trips {
        let skill = trip.skill.as_deref().expect("a withdrawal names its tool");
        assert!(
            trip.detail.starts_with(&format!("`{skill}` ")),
            "{skill}: {}",
            trip.detail
        );
    }
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
