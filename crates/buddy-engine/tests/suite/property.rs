//! For random scripted behaviours (random calls, repeats, cycles, text, failures) and
//! random policies, every turn terminates within its limits with exactly one terminal
//! event and a valid history.

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{ChatEvent, RepeatSemantics, StopReason, ToolOutcome};
use buddy_engine::{Engine, LoopPolicy, OnLimit, TurnRequest};
use buddy_testkit::{
    ReplyProvider, TestTool, TestToolbox, assert_event_order, assert_history_valid, reply_tokens,
};
use proptest::prelude::*;
use serde_json::json;

use super::{WORDS, call};

/// One scripted model response.
#[derive(Clone, Debug)]
struct Round {
    text: u8,
    calls: Vec<(u8, u8)>,
}

const TEXTS: [&str; 4] = [
    "",
    "Let me check.",
    "Here is a complete answer that explains everything the user asked about in detail, with all the facts needed.",
    "Here is a complete answer that explains everything the user asked about in detail, with all facts needed!",
];
const TOOLS: [&str; 3] = ["alpha", "beta", "gamma"];

fn round() -> impl Strategy<Value = Round> {
    (0u8..4, prop::collection::vec((0u8..3, 0u8..4), 0..4))
        .prop_map(|(text, calls)| Round { text, calls })
}

fn policy() -> impl Strategy<Value = LoopPolicy> {
    (
        2u32..30,
        1u32..30,
        any::<bool>(),
        any::<bool>(),
        1u32..5,
        1u32..4,
        0usize..3,
    )
        .prop_map(
            |(
                max_model_calls,
                max_tool_calls,
                error,
                loop_detection,
                parallel,
                failures,
                substantive,
            )| LoopPolicy {
                max_model_calls,
                max_tool_calls,
                on_limit: if error {
                    OnLimit::Error
                } else {
                    OnLimit::Finalize
                },
                loop_detection,
                max_parallel_tools: parallel,
                max_consecutive_failures: failures,
                substantive_answer_chars: [None, Some(50), Some(200)][substantive],
                ..LoopPolicy::default()
            },
        )
}

fn semantics(i: u8) -> RepeatSemantics {
    [
        RepeatSemantics::Pure,
        RepeatSemantics::Pollable,
        RepeatSemantics::Effectful,
    ][usize::from(i % 3)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_turn_terminates_within_its_limits(
        rounds in prop::collection::vec(round(), 1..12),
        policy in policy(),
        tool_semantics in prop::collection::vec(0u8..3, 3),
        failing in prop::collection::vec(any::<bool>(), 3),
        ignores_withdrawal in any::<bool>(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let script = rounds.clone();
        let provider = ReplyProvider::new(move |req, i| {
            // The model cycles through its script; it may keep calling tools it is not offered.
            let round = &script[i % script.len()];
            if !req.offers_tools() && !ignores_withdrawal {
                return Ok(reply_tokens(TEXTS[usize::from(round.text)], vec![]));
            }
            let calls = round
                .calls
                .iter()
                .enumerate()
                .map(|(k, (tool, arg))| call(&format!("c{i}_{k}"), TOOLS[usize::from(*tool)], json!({"arg": arg})))
                .collect();
            Ok(reply_tokens(TEXTS[usize::from(round.text)], calls))
        });
        let mut toolbox = TestToolbox::new();
        for (i, name) in TOOLS.iter().enumerate() {
            let fails = failing[i];
            let tool = TestTool::new(move |call, n| {
                if fails && n % 2 == 0 {
                    ToolOutcome::error(format!("{} failed", call.name))
                } else {
                    ToolOutcome::ok(format!("{} says {}", call.name, WORDS[n % WORDS.len()]))
                }
            })
            .semantics(semantics(tool_semantics[i]));
            toolbox = toolbox.with(name, tool);
        }
        let engine = Engine::new(Arc::new(provider), Arc::new(toolbox));
        let request = TurnRequest::new("prop", "do the thing").with_policy(policy.clone()).with_clock(buddy_testkit::no_wait());
        let (events, outcome) = runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(20), engine.run_collect(request)).await })
            .expect("the turn must terminate");

        assert_event_order(&events);
        assert_history_valid(&outcome.messages);
        let replayed = runtime
            .block_on(buddy_engine::replay(&outcome.recording(), None))
            .expect("the recording replays");
        prop_assert!(replayed.same_stop && replayed.beyond.is_none(), "replay differs: {:#?}", replayed);
        prop_assert!(outcome.stats.model_calls <= policy.max_model_calls, "{:?}", outcome.stats);
        prop_assert!(outcome.stats.tool_calls <= policy.max_tool_calls, "{:?}", outcome.stats);
        match events.last() {
            Some(ChatEvent::Done { reason, answer, .. }) => {
                prop_assert_eq!(*reason, outcome.reason);
                prop_assert!(!answer.trim().is_empty(), "a Done turn always carries an answer");
            }
            Some(ChatEvent::Error { reason, .. }) => {
                prop_assert_eq!(*reason, outcome.reason);
                prop_assert_eq!(policy.on_limit, OnLimit::Error, "only on_limit = error ends without an answer here");
            }
            other => prop_assert!(false, "bad terminal event {:?}", other),
        }
        prop_assert!(outcome.reason != StopReason::Cancelled);
    }
}
