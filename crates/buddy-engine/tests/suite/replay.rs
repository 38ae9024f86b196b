//! Replay: a recorded turn played back through the engine, without the model or the
//! tools, under its own policy (it must do exactly what it did) and under others.

use buddy_core::{GuardKind, Message, RepeatSemantics, StopReason, ToolOutcome};
use buddy_engine::{LoopPolicy, Wanted, replay};
use buddy_testkit::{ReplyProvider, TestTool, TestToolbox, reply_tokens};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{WORDS, call, run_turn};

/// A model that calls `search` with a new query every round, for ever (when tools are
/// offered), and answers when asked without tools.
fn runaway() -> ReplyProvider {
    ReplyProvider::new(|req, i| {
        if !req.offers_tools() {
            return Ok(reply_tokens("Here is what I found.", vec![]));
        }
        Ok(reply_tokens(
            "Searching.",
            vec![call(
                &format!("c{i}"),
                "search",
                json!({"q": format!("topic {i}")}),
            )],
        ))
    })
}

fn searcher() -> TestToolbox {
    TestToolbox::new().with(
        "search",
        TestTool::new(|_, n| ToolOutcome::ok(format!("found the {}", WORDS[n % 16]))),
    )
}

#[tokio::test]
async fn a_turn_replayed_under_its_own_policy_does_exactly_what_it_did() {
    let policy = LoopPolicy {
        max_model_calls: 6,
        ..LoopPolicy::default()
    };
    let (_, outcome) = run_turn(runaway(), searcher(), policy).await;
    assert_eq!(outcome.reason, StopReason::MaxModelCalls);
    let recording = outcome.recording();
    let replayed = replay(&recording, None).await.expect("replays");
    assert!(replayed.same_stop, "{replayed:#?}");
    assert_eq!(replayed.beyond, None);
    assert_eq!(replayed.recorded, replayed.replayed);
    assert!(replayed.only_recorded.is_empty() && replayed.only_replayed.is_empty());
    assert_eq!(replayed.replayed.calls.len(), 5);
}

#[tokio::test]
async fn a_capped_turn_under_a_larger_cap_goes_beyond_the_recording() {
    let policy = LoopPolicy {
        max_model_calls: 4,
        ..LoopPolicy::default()
    };
    let (_, outcome) = run_turn(runaway(), searcher(), policy).await;
    let larger = LoopPolicy {
        max_model_calls: 40,
        ..LoopPolicy::default()
    };
    let replayed = replay(&outcome.recording(), Some(larger))
        .await
        .expect("replays");
    let beyond = replayed.beyond.clone().expect("beyond the recording");
    assert_eq!(beyond.after_model_call, 3);
    assert_eq!(beyond.wanted, Wanted::Reply);
    assert!(
        beyond
            .why
            .contains("where the recording asked for the final answer"),
        "{}",
        beyond.why
    );
    assert_eq!(replayed.replayed.reason, None);
    assert_eq!(replayed.recorded.reason, Some(StopReason::MaxModelCalls));
    assert!(!replayed.same_stop);
    // The recording's cap trip is one the larger cap does not make.
    assert_eq!(replayed.only_recorded.len(), 1);
    assert_eq!(replayed.only_recorded[0].guard, GuardKind::ModelCallLimit);
}

#[tokio::test]
async fn a_tighter_policy_says_where_it_would_stop_and_why() {
    let policy = LoopPolicy {
        max_model_calls: 8,
        ..LoopPolicy::default()
    };
    let (_, outcome) = run_turn(runaway(), searcher(), policy).await;
    let tighter = LoopPolicy {
        max_tool_calls: 3,
        ..LoopPolicy::default()
    };
    let replayed = replay(&outcome.recording(), Some(tighter))
        .await
        .expect("replays");
    assert_eq!(replayed.replayed.reason, Some(StopReason::MaxToolCalls));
    let stopped = replayed
        .replayed
        .stopped_by
        .clone()
        .expect("a guard stopped it");
    assert_eq!(stopped.guard, GuardKind::ToolCallLimit);
    assert_eq!(stopped.detail, "3 of 3 tool calls used");
    let beyond = replayed
        .beyond
        .clone()
        .expect("its final answer is not recorded");
    assert_eq!(beyond.wanted, Wanted::FinalAnswer);
    assert_eq!(replayed.replayed.model_calls, 5);
    assert_eq!(replayed.replayed.calls.len(), 3);
}

#[tokio::test]
async fn a_pure_repeat_the_recording_answered_from_memory_is_answered_again() {
    // The model reads the same file three times; `read` is pure.
    let model = ReplyProvider::new(|req, i| {
        if !req.offers_tools() || i >= 3 {
            return Ok(reply_tokens("The file says hello.", vec![]));
        }
        Ok(reply_tokens(
            "",
            vec![call(&format!("r{i}"), "read", json!({"p": "a.txt"}))],
        ))
    });
    let tools = TestToolbox::new().with(
        "read",
        TestTool::new(|_, _| ToolOutcome::ok("hello")).semantics(RepeatSemantics::Pure),
    );
    let (_, outcome) = run_turn(model, tools, LoopPolicy::default()).await;
    let recorded_calls = outcome
        .messages
        .iter()
        .filter(|m| matches!(m, Message::Tool { .. }))
        .count();
    assert!(recorded_calls >= 2);
    // Without loop detection the repeats run: a pure skill's repeat has a known result.
    let off = LoopPolicy {
        loop_detection: false,
        ..LoopPolicy::default()
    };
    let replayed = replay(&outcome.recording(), Some(off))
        .await
        .expect("replays");
    assert_eq!(replayed.replayed.calls.len(), 3, "{replayed:#?}");
    // It leaves the recording only where the recorded turn was asked for its final answer.
    let beyond = replayed
        .beyond
        .expect("the fourth reply was a final answer");
    assert_eq!((beyond.after_model_call, beyond.wanted), (3, Wanted::Reply));
}

#[tokio::test]
async fn a_tape_survives_json_and_a_changed_stored_conversation_is_refused() {
    let (_, outcome) = run_turn(runaway(), searcher(), LoopPolicy::default()).await;
    let recording = outcome.recording();
    let json = serde_json::to_string(&recording).expect("serialises");
    let back: buddy_engine::Recording = serde_json::from_str(&json).expect("reads back");
    assert_eq!(back, recording);
    let mut broken = recording.clone();
    broken.new_messages.truncate(2);
    let err = replay(&broken, None)
        .await
        .expect_err("points past the messages");
    assert!(err.to_string().contains("does not match its tape"), "{err}");
    let mut old = recording;
    old.tape.version = 0;
    let err = replay(&old, None).await.expect_err("old tape");
    assert!(err.to_string().contains("record the turn again"), "{err}");
}
