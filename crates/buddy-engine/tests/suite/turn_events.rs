//! `Engine::events`: the turn run by the task that reads it gives the same events, in
//! the same order, as `Engine::spawn`, and the same outcome.

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{ChatEvent, FinishReason, StopReason, Token, ToolOutcome};
use buddy_engine::{Engine, TurnRequest};
use buddy_testkit::{
    ReplyProvider, TestTool, TestToolbox, assert_event_order, assert_history_valid, reply_tokens,
};
use futures::StreamExt;
use serde_json::{Value, json};

use super::call;

/// Bounds every test here: a stream that stops being woken fails instead of hanging.
const BOUND: Duration = Duration::from_secs(30);

/// Two rounds of calls, each reply streamed as many small text tokens, then an answer.
fn engine(pieces: usize) -> Arc<Engine> {
    let provider = ReplyProvider::new(move |_, i| {
        let mut tokens: Vec<_> = (0..pieces)
            .map(|n| {
                Ok(Token::Text {
                    text: format!("r{i}p{n} "),
                })
            })
            .collect();
        if i < 2 {
            tokens.extend(reply_tokens(
                "",
                vec![call(&format!("c{i}"), "lookup", json!({"n": i}))],
            ));
        } else {
            tokens.push(Ok(Token::Finish {
                reason: FinishReason::Stop,
                usage: None,
            }));
        }
        Ok(tokens)
    });
    let tools = TestToolbox::new().with("lookup", TestTool::new(|_, _| ToolOutcome::ok("42")));
    Arc::new(Engine::new(Arc::new(provider), Arc::new(tools)))
}

/// An event without what differs between two runs of one turn (times).
fn shape(event: &ChatEvent) -> Value {
    let mut value = serde_json::to_value(event).unwrap();
    strip_times(&mut value);
    value
}

fn strip_times(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|key, _| !key.ends_with("_ms") && !key.ends_with("_us"));
            map.values_mut().for_each(strip_times);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_times),
        _ => {}
    }
}

async fn spawned(engine: &Arc<Engine>) -> (Vec<ChatEvent>, buddy_engine::TurnOutcome) {
    let (mut rx, turn) = engine.spawn(TurnRequest::new("m", "go"));
    let mut events = Vec::new();
    while let Some(event) = rx.recv().await {
        events.push(event);
    }
    (events, turn.await.unwrap())
}

async fn inline(engine: &Arc<Engine>) -> (Vec<ChatEvent>, buddy_engine::TurnOutcome) {
    let mut stream = engine.events(TurnRequest::new("m", "go"));
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event);
    }
    let outcome = stream.outcome().expect("an outcome once the stream ended");
    assert!(stream.outcome().is_none(), "the outcome is taken once");
    (events, outcome)
}

async fn same_as_spawn(pieces: usize) {
    // An engine each: the provider numbers its calls.
    let (events, outcome) = tokio::time::timeout(BOUND, inline(&engine(pieces)))
        .await
        .unwrap();
    let (spawn_events, spawn_outcome) = tokio::time::timeout(BOUND, spawned(&engine(pieces)))
        .await
        .unwrap();
    assert_event_order(&events);
    assert_history_valid(&outcome.messages);
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_eq!(outcome.stats.model_calls, 3);
    assert_eq!(outcome.stats.tool_calls, 2);
    assert_eq!(
        events.iter().map(shape).collect::<Vec<_>>(),
        spawn_events.iter().map(shape).collect::<Vec<_>>()
    );
    assert_eq!(outcome.answer, spawn_outcome.answer);
    assert_eq!(outcome.messages, spawn_outcome.messages);
    let deltas = events
        .iter()
        .filter(|e| matches!(e, ChatEvent::TextDelta { .. }))
        .count();
    assert_eq!(deltas, 3 * pieces);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_read_as_its_events_gives_what_a_spawned_turn_gives() {
    same_as_spawn(5).await;
}

#[tokio::test]
async fn more_events_than_the_channel_holds_all_arrive_on_one_thread() {
    // 3 × 400 text events: the turn waits for room in its channel, which only the
    // reader of the same task can make.
    same_as_spawn(400).await;
}

#[tokio::test]
async fn the_outcome_comes_when_the_stream_ends_and_dropping_it_drops_the_turn() {
    let provider = ReplyProvider::new(|_, _| {
        Ok(reply_tokens(
            "Looking.",
            vec![call("c0", "slow", json!({}))],
        ))
    });
    let tools = TestToolbox::new().with(
        "slow",
        TestTool::new(|_, _| ToolOutcome::ok("done")).delay(Duration::from_secs(600)),
    );
    let engine = Arc::new(Engine::new(Arc::new(provider), Arc::new(tools)));
    let mut stream = engine.events(TurnRequest::new("m", "go"));
    tokio::time::timeout(BOUND, async {
        while let Some(event) = stream.next().await {
            if matches!(event, ChatEvent::ToolCallStart { .. }) {
                break;
            }
        }
    })
    .await
    .unwrap();
    // The tool runs (for ten minutes): the turn has no outcome yet, and dropping the
    // stream drops the turn with it rather than waiting.
    assert!(stream.outcome().is_none());
    drop(stream);
}
