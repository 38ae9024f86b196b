//! Termination v5: warn, then end (the first trip of a repeat adds a note and the turn goes
//! on; the end comes only if the model keeps at it), near-repeats (results that differ
//! only in their numbers), failures that are answers, and trips that decay after progress.

use proptest::prelude::*;

use super::*;
use crate::judge::results::{OBSERVED_PATIENCE, REPEAT_END};

/// The result of an edit that inserted the same imports `copies` times: the file shown
/// again, grown.
fn grown_file(copies: u32) -> String {
    let mut out = format!(
        "[File: /repo/src/Main.java ({} lines total)]\n",
        120 + 54 * copies
    );
    let mut n = 0;
    for _ in 0..copies {
        for line in ["import java.util.List;", "import java.util.Map;"] {
            n += 1;
            out.push_str(&format!("{n}:{line}\n"));
        }
    }
    for line in ["public class Main {", "    void run() {}", "}"] {
        n += 1;
        out.push_str(&format!("{n}:{line}\n"));
    }
    out.push_str("File updated. Please review the changes and make sure they are correct.");
    out
}

fn edit_call() -> Vec<(&'static str, serde_json::Value)> {
    vec![(
        "write",
        json!({"path": "Main.java", "start": 1, "end": 1, "text": "import java.util.List;"}),
    )]
}

#[test]
fn a_growing_file_edit_is_warned_at_the_fifth_and_ended_at_the_eighth() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    for copies in 1..=8u32 {
        let seen = turn.round(edit_call(), RepeatSemantics::Observed, &move |_| {
            ToolOutcome::ok(grown_file(copies))
        });
        match copies {
            5 => {
                assert_eq!(
                    seen.guards(),
                    [(GuardKind::Repetition, GuardAction::Warned)]
                );
                let note = seen.verdict.notes.join("\n");
                assert!(note.contains("differed only in their numbers"), "{note}");
                assert!(note.contains("lines total"), "the evidence: {note}");
            }
            8 => assert_eq!(
                seen.stop(),
                Some((StopReason::LoopDetected, GuardKind::Repetition))
            ),
            _ => assert!(
                seen.trips.is_empty() && seen.verdict.cause.is_none(),
                "edit {copies}: {seen:?}"
            ),
        }
    }
}

#[test]
fn a_model_that_changes_course_after_the_note_goes_on() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    for look in 1..=5 {
        let seen = turn.round(
            vec![("read", json!({"path": "a.txt"}))],
            RepeatSemantics::Observed,
            &same("the release is on Friday"),
        );
        assert_eq!(seen.trips.is_empty(), look != 5, "look {look}");
    }
    for (n, path) in ["b.txt", "c.txt", "d.txt", "e.txt"].iter().enumerate() {
        let seen = turn.round(
            vec![("read", json!({ "path": path }))],
            RepeatSemantics::Observed,
            &move |_| ToolOutcome::ok(format!("note {n}: owner is person {n}")),
        );
        assert!(
            seen.trips.is_empty() && seen.verdict.cause.is_none(),
            "{path}: {seen:?}"
        );
    }
    // Back to a.txt after new work is checking anew, not the old loop.
    let seen = turn.round(
        vec![("read", json!({"path": "a.txt"}))],
        RepeatSemantics::Observed,
        &same("the release is on Friday"),
    );
    assert!(seen.trips.is_empty() && seen.verdict.cause.is_none());
}

#[test]
fn a_job_that_answers_running_seven_times_then_finishes_completes() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    for look in 1..=8 {
        let state = if look == 8 {
            "done: 1,204 rows"
        } else {
            "running"
        };
        let seen = turn.round(
            vec![("status", json!({"job": "j_42"}))],
            RepeatSemantics::Observed,
            &same(state),
        );
        assert!(seen.verdict.cause.is_none(), "look {look}: {seen:?}");
    }
}

#[test]
fn rising_progress_is_a_job_moving_toward_its_end() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    for percent in (0..=100).step_by(5) {
        let seen = turn.round(
            vec![("status", json!({"job": "j_42"}))],
            RepeatSemantics::Observed,
            &move |_| ToolOutcome::ok(format!("export running: {percent}% of the rows written")),
        );
        assert!(
            seen.trips.is_empty() && seen.verdict.cause.is_none(),
            "{percent}%: {seen:?}"
        );
    }
}

#[test]
fn distinct_greps_that_find_nothing_never_trip_the_circuit_breaker() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    for pattern in [
        "retry_limit",
        "RETRY_LIMIT",
        "retries =",
        "backoff",
        "max_tries",
    ] {
        let seen = turn.round(
            vec![("search", json!({ "pattern": pattern }))],
            RepeatSemantics::Observed,
            &|_| ToolOutcome::error("exit status 1 (no match)"),
        );
        assert!(
            seen.trips.is_empty() && seen.verdict.cause.is_none(),
            "{pattern}: {seen:?}"
        );
    }
    // The same grep failing the same way three times is a broken call: withdrawn.
    let mut guards = Vec::new();
    for _ in 0..3 {
        let seen = turn.round(
            vec![("search", json!({"pattern": "backoff"}))],
            RepeatSemantics::Observed,
            &|_| ToolOutcome::error("exit status 1 (no match)"),
        );
        guards.extend(seen.guards());
    }
    assert!(
        guards.contains(&(GuardKind::CircuitBreaker, GuardAction::WithdrewSkill)),
        "{guards:?}"
    );
}

/// Five identical calls of `search` for `q` (a warning at the fifth), each answered
/// `answer`; returns the stop of the last round, if any.
fn warned_repeat(
    turn: &mut Turn,
    q: &str,
    answer: &'static str,
) -> Option<(StopReason, GuardKind)> {
    let mut stop = None;
    for _ in 0..5 {
        stop = turn
            .round(
                vec![("search", json!({ "q": q }))],
                RepeatSemantics::Observed,
                &same(answer),
            )
            .stop();
    }
    stop
}

#[test]
fn guard_trips_followed_by_real_progress_do_not_add_up() {
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    for (k, q) in ["first", "second", "third", "fourth"].iter().enumerate() {
        assert_eq!(warned_repeat(&mut turn, q, "nothing found"), None, "{q}");
        // Real progress: a new action that brings a new result.
        let seen = turn.round(
            vec![("read", json!({ "step": k }))],
            RepeatSemantics::Observed,
            &move |_| ToolOutcome::ok(format!("step {k}: found part {k} of the answer")),
        );
        assert!(seen.verdict.cause.is_none());
    }
    assert_eq!(turn.judge.memory.ladder.total(), 4);

    // The same trips with nothing new in between add up to the budget.
    let mut turn = Turn::new(quiet(LoopPolicy::default()));
    assert_eq!(warned_repeat(&mut turn, "first", "nothing found"), None);
    assert_eq!(warned_repeat(&mut turn, "second", "nothing found"), None);
    assert_eq!(
        warned_repeat(&mut turn, "third", "nothing found"),
        Some((StopReason::LoopDetected, GuardKind::Repetition))
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A model warned about a repeat (five to seven identical calls) that then does new
    /// work completes: nothing ends the turn.
    #[test]
    fn a_warned_model_that_changes_course_completes(
        repeats in OBSERVED_PATIENCE + 1..=REPEAT_END,
        prefix in 0usize..20,
        after in 1usize..40,
    ) {
        let mut turn = Turn::new(quiet(LoopPolicy::default()));
        let mut causes = Vec::new();
        for n in 0..prefix {
            let seen = turn.round(
                vec![("read", json!({ "file": format!("src/{n}.rs") }))],
                RepeatSemantics::Observed,
                &move |_| ToolOutcome::ok(format!("fn part_{n}() {{}}")),
            );
            causes.push(seen.verdict.cause);
        }
        for _ in 0..repeats {
            let seen = turn.round(
                vec![("status", json!({"run": "tests"}))],
                RepeatSemantics::Observed,
                &same("FAILED test_add: expected 3, got 2"),
            );
            causes.push(seen.verdict.cause);
        }
        for n in 0..after {
            let seen = turn.round(
                vec![("write", json!({ "file": format!("fix_{n}.py") }))],
                RepeatSemantics::Observed,
                &move |_| ToolOutcome::ok(format!("wrote fix {n}")),
            );
            causes.push(seen.verdict.cause);
        }
        prop_assert!(causes.iter().all(Option::is_none), "{:?}", causes);
    }

    /// The same call whose results only grow (line counts, sizes, line numbers) after any
    /// start is warned at its fifth result and ended at its eighth.
    #[test]
    fn near_repeats_with_growing_counts_end_by_the_eighth(
        steps in prop::collection::vec(1u32..=3, 8),
        prefix in 0usize..10,
    ) {
        let mut turn = Turn::new(quiet(LoopPolicy::default()));
        for n in 0..prefix {
            turn.round(
                vec![("read", json!({ "file": format!("src/{n}.rs") }))],
                RepeatSemantics::Observed,
                &move |_| ToolOutcome::ok(format!("fn part_{n}() {{}}")),
            );
        }
        let mut copies = 0;
        let mut outcome = Vec::new();
        for step in steps {
            copies += step;
            let result = grown_file(copies);
            let seen = turn.round(
                edit_call(),
                RepeatSemantics::Observed,
                &move |_| ToolOutcome::ok(result.clone()),
            );
            outcome.push((seen.guards(), seen.stop()));
        }
        prop_assert_eq!(&outcome[4].0, &vec![(GuardKind::Repetition, GuardAction::Warned)]);
        prop_assert!(outcome[..7].iter().all(|(_, stop)| stop.is_none()), "{:?}", outcome);
        prop_assert_eq!(outcome[7].1, Some((StopReason::LoopDetected, GuardKind::Repetition)));
    }

    /// A job polled with the same arguments whose progress figure rises (however slowly)
    /// to 100% completes untouched.
    #[test]
    fn rising_progress_completes(steps in prop::collection::vec(1u32..=20, 1..60)) {
        let mut turn = Turn::new(quiet(LoopPolicy::default()));
        let mut percent = 0;
        for step in steps {
            percent = (percent + step).min(100);
            let seen = turn.round(
                vec![("status", json!({"job": "j_42"}))],
                RepeatSemantics::Observed,
                &move |_| ToolOutcome::ok(format!("export running: {percent}% ({percent}/100 parts), 12 MB written")),
            );
            prop_assert!(seen.trips.is_empty() && seen.verdict.cause.is_none(), "{}%: {:?}", percent, seen);
            if percent == 100 {
                break;
            }
        }
    }

    /// Distinct actions of one skill that all fail with the same message never trip a
    /// guard: each is an answer ("no match").
    #[test]
    fn distinct_failures_are_answers(patterns in prop::collection::btree_set("[a-z_]{3,12}", 1..30)) {
        let mut turn = Turn::new(quiet(LoopPolicy::default()));
        for pattern in patterns {
            let seen = turn.round(
                vec![("search", json!({ "pattern": pattern }))],
                RepeatSemantics::Observed,
                &|_| ToolOutcome::error("exit status 1 (no match)"),
            );
            prop_assert!(seen.trips.is_empty() && seen.verdict.cause.is_none(), "{}: {:?}", pattern, seen);
        }
    }
}
