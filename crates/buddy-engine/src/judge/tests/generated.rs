//! Generated behaviours, judged round by round: what real agents do (new actions whatever
//! they return, jobs polled in any order) never trips a guard; loops (the same call, cycles,
//! flip-flops, the same failure) end within their bounds, after any legitimate start.

use proptest::prelude::*;

use super::*;
use crate::judge::results::{OBSERVED_PATIENCE, REPEAT_END};

/// Words distinct actions are made of.
const WORDS: [&str; 8] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
];
const TOOLS: [&str; 4] = ["search", "read", "status", "write"];

/// How a tool answers every new action of a run.
#[derive(Clone, Copy, Debug)]
enum Answer {
    Ok,
    Empty,
    Echo,
    Null,
}

fn answer(kind: Answer, call: &ToolCall) -> ToolOutcome {
    ToolOutcome::ok(match kind {
        Answer::Ok => "ok".to_owned(),
        Answer::Empty => String::new(),
        Answer::Echo => format!("done: {}", call.arguments),
        Answer::Null => "None".to_owned(),
    })
}

fn answers() -> impl Strategy<Value = Answer> {
    prop_oneof![
        Just(Answer::Ok),
        Just(Answer::Empty),
        Just(Answer::Echo),
        Just(Answer::Null)
    ]
}

/// The policy of a generated run: limits out of the way, the loop guards as shipped.
fn guards_only() -> LoopPolicy {
    quiet(LoopPolicy::default())
}

/// Plays `rounds` of new actions (each round 1-4 calls of tools in `tools`, the `n`-th
/// action of the run named by a word and its number) answered by `kind`; returns the
/// trips and causes seen.
fn new_actions(turn: &mut Turn, rounds: &[(u8, u8)], kind: Answer, start: usize) -> Vec<String> {
    let mut seen = Vec::new();
    let mut n = start;
    for (r, &(width, tool)) in rounds.iter().enumerate() {
        let calls: Vec<(&str, serde_json::Value)> = (0..width)
            .map(|k| {
                n += 1;
                let word = WORDS[n % WORDS.len()];
                (
                    TOOLS[(usize::from(tool) + usize::from(k)) % TOOLS.len()],
                    json!({"target": format!("{word}-{n}"), "step": n}),
                )
            })
            .collect();
        let round = turn.round(calls, RepeatSemantics::Observed, &move |c| answer(kind, c));
        if !round.trips.is_empty() || round.verdict.cause.is_some() {
            seen.push(format!(
                "round {r}: {:?} {:?}",
                round.trips, round.verdict.cause
            ));
        }
    }
    seen
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Up to the default cap of model calls, every call a new action, the results all
    /// the same (`ok`, empty, an echo of the arguments, `None`): nothing trips.
    #[test]
    fn new_actions_complete_whatever_they_return(
        rounds in prop::collection::vec((1u8..=4, 0u8..4), 1..=149),
        kind in answers(),
    ) {
        let mut turn = Turn::new(guards_only());
        let seen = new_actions(&mut turn, &rounds, kind, 0);
        prop_assert!(seen.is_empty(), "{kind:?}: {seen:?}");
    }

    /// Up to four jobs polled in any interleaving, each answering "running" at most
    /// [`OBSERVED_PATIENCE`] times before "done": every job finishes (polls that go round
    /// with nothing new may be warned as a cycle, never ended).
    #[test]
    fn jobs_polled_in_any_order_finish_within_patience(
        running in prop::collection::vec(0u32..=OBSERVED_PATIENCE, 1..=4),
        order in prop::collection::vec(0usize..4, 0..64),
    ) {
        let mut turn = Turn::new(guards_only());
        let mut polls = vec![0u32; running.len()];
        // Every job is polled until done: first in the generated order, then in turn.
        let mut schedule: Vec<usize> = order.into_iter().map(|j| j % running.len()).collect();
        schedule.extend((0..running.len()).cycle().take(running.len() * (OBSERVED_PATIENCE as usize + 1)));
        for job in schedule {
            if polls[job] > running[job] {
                continue;
            }
            polls[job] += 1;
            let state = if polls[job] > running[job] { "done: 48,213 rows" } else { "running" };
            let round = turn.round(
                vec![("status", json!({"job": job}))],
                RepeatSemantics::Observed,
                &same(state),
            );
            prop_assert!(
                round.verdict.cause.is_none()
                    && round.trips.iter().all(|t| t.action == GuardAction::Warned),
                "job {job} poll {}: {round:?}", polls[job]
            );
        }
        prop_assert!(polls.iter().zip(&running).all(|(p, r)| p > r), "every job finished");
    }

    /// After any run of new actions, the same call with the same result is warned at its
    /// fifth time and ends the turn at its eighth.
    #[test]
    fn identical_repeats_are_warned_at_the_fifth_and_end_by_the_eighth(
        prefix in prop::collection::vec((1u8..=2, 0u8..4), 0..=20),
        kind in answers(),
    ) {
        let mut turn = Turn::new(guards_only());
        new_actions(&mut turn, &prefix, kind, 0);
        let mut stops = Vec::new();
        let mut warned = Vec::new();
        for _ in 0..=REPEAT_END {
            let round = turn.round(
                vec![("search", json!({"q": "the same question"}))],
                RepeatSemantics::Observed,
                &same("the same answer"),
            );
            warned.push(round.guards().contains(&(GuardKind::Repetition, GuardAction::Warned)));
            stops.push(round.stop());
        }
        let end = REPEAT_END as usize;
        prop_assert_eq!(stops[..end].iter().flatten().count(), 0, "{:?}", stops);
        prop_assert_eq!(stops[end], Some((StopReason::LoopDetected, GuardKind::Repetition)));
        prop_assert!(warned[OBSERVED_PATIENCE as usize], "warned at the fifth: {:?}", warned);
    }

    /// Calls in a cycle of period 2-4, each with the same result every time, end the
    /// turn by the fifth time round (each member has the patience of a polled job).
    #[test]
    fn cycles_end_within_five_turns_of_the_cycle(
        period in 2usize..=4,
        prefix in prop::collection::vec((1u8..=2, 0u8..4), 0..=10),
    ) {
        let mut turn = Turn::new(guards_only());
        new_actions(&mut turn, &prefix, Answer::Ok, 0);
        let mut ended = None;
        for r in 0..5 * period {
            let member = r % period;
            let round = turn.round(
                vec![(TOOLS[member], json!({"city": "Paris"}))],
                RepeatSemantics::Observed,
                &move |_| ToolOutcome::ok(format!("{member}: 14 degrees")),
            );
            if let Some(stop) = round.stop() {
                ended = Some((r + 1, stop));
                break;
            }
        }
        let (rounds, (reason, _)) = ended.expect("the cycle ends");
        prop_assert!(rounds <= 5 * period, "{rounds} rounds");
        prop_assert_eq!(reason, StopReason::LoopDetected);
    }

    /// One call whose result flips among 2-4 states ends the turn once every state has
    /// been seen and [`REPEAT_END`] answers in a row said nothing new.
    #[test]
    fn flip_flops_end_within_their_bound(states in 2usize..=4) {
        let names = ["running", "queued", "retrying", "paused"];
        let mut turn = Turn::new(guards_only());
        let mut ended = None;
        for r in 0..states + REPEAT_END as usize {
            let state = names[r % states];
            let round = turn.round(
                vec![("status", json!({"job": 7}))],
                RepeatSemantics::Observed,
                &same(state),
            );
            if let Some(stop) = round.stop() {
                ended = Some(r + 1);
                prop_assert_eq!(stop.0, StopReason::LoopDetected);
                break;
            }
        }
        prop_assert_eq!(ended, Some(states + REPEAT_END as usize));
    }

    /// The same call failing the same way ends the turn within four rounds (the circuit
    /// breaker, then a call to the withdrawn skill); distinct calls of one skill failing
    /// with the same message are answers, and never withdraw it.
    #[test]
    fn the_same_failure_ends_within_four_rounds(same_call in any::<bool>()) {
        let mut turn = Turn::new(guards_only());
        let mut ended = None;
        for (r, currency) in WORDS.iter().take(6).enumerate() {
            let args = if same_call {
                json!({"url": "https://rates.example"})
            } else {
                json!({ "currency": currency })
            };
            let round = turn.round(
                vec![("read", args)],
                RepeatSemantics::Observed,
                &|_| ToolOutcome::error("connection refused"),
            );
            prop_assert!(
                same_call || round.trips.is_empty(),
                "distinct failures tripped: {:?}", round.trips
            );
            if round.stop().is_some() {
                ended = Some(r + 1);
                break;
            }
        }
        prop_assert_eq!(ended.is_some_and(|r| r <= 4), same_call, "{:?}", ended);
    }
}
