use std::sync::Arc;
use std::time::Duration;

use buddy_core::{ChatEvent, Message, StopReason, ToolOutcome};
use buddy_engine::{CancellationToken, Engine, LoopPolicy, TurnRequest};
use buddy_testkit::{
    ReplyProvider, TestTool, TestToolbox, assert_event_order, assert_history_valid, reply_tokens,
};
use serde_json::json;

use super::call;

/// Bounds every test here: a broken cancellation fails instead of hanging.
const BOUND: Duration = Duration::from_secs(30);

fn slow_tool_model() -> ReplyProvider {
    ReplyProvider::new(|req, i| {
        Ok(if req.offers_tools() {
            reply_tokens(
                "Working on it.",
                vec![
                    call(&format!("c{i}a"), "slow", json!({})),
                    call(&format!("c{i}b"), "fast", json!({})),
                ],
            )
        } else {
            reply_tokens("Partial answer from what finished.", vec![])
        })
    })
}

fn slow_toolbox() -> TestToolbox {
    TestToolbox::new()
        .with(
            "slow",
            TestTool::new(|_, _| ToolOutcome::ok("slow done")).delay(Duration::from_secs(120)),
        )
        .with("fast", TestTool::new(|_, _| ToolOutcome::ok("fast done")))
}

#[tokio::test]
async fn cancelling_mid_tool_ends_with_done_cancelled_and_a_valid_history() {
    let engine = Arc::new(Engine::new(
        Arc::new(slow_tool_model()),
        Arc::new(slow_toolbox()),
    ));
    let cancel = CancellationToken::new();
    let request = TurnRequest::new("m", "go").with_cancel(cancel.clone());
    let (mut rx, handle) = engine.spawn(request);
    let mut events = Vec::new();
    tokio::time::timeout(BOUND, async {
        while let Some(event) = rx.recv().await {
            if matches!(event, ChatEvent::ToolCallStart { .. }) {
                cancel.cancel();
            }
            events.push(event);
        }
    })
    .await
    .expect("the turn must end soon after cancellation");
    let outcome = handle.await.unwrap();
    assert_event_order(&events);
    assert_history_valid(&outcome.messages);
    assert_eq!(outcome.reason, StopReason::Cancelled);
    assert!(matches!(
        events.last(),
        Some(ChatEvent::Done {
            reason: StopReason::Cancelled,
            ..
        })
    ));
    assert!(
        outcome
            .messages
            .iter()
            .any(|m| matches!(m, Message::Tool { content, is_error: true, .. } if content.contains("cancelled"))),
        "the interrupted call gets an error result: {:#?}",
        outcome.messages
    );
}

#[tokio::test]
async fn cancelling_before_the_first_call_still_emits_done() {
    let engine = Engine::new(Arc::new(slow_tool_model()), Arc::new(slow_toolbox()));
    let cancel = CancellationToken::new();
    cancel.cancel();
    let (events, outcome) = engine
        .run_collect(TurnRequest::new("m", "go").with_cancel(cancel))
        .await;
    assert_event_order(&events);
    assert_eq!(outcome.reason, StopReason::Cancelled);
    assert_eq!(outcome.stats.model_calls, 0);
}

#[tokio::test]
async fn a_deadline_mid_tool_finalizes_with_an_answer() {
    let engine = Engine::new(Arc::new(slow_tool_model()), Arc::new(slow_toolbox()));
    let policy = LoopPolicy {
        deadline_ms: Some(300),
        ..LoopPolicy::default()
    };
    let run = engine.run_collect(TurnRequest::new("m", "go").with_policy(policy));
    let (events, outcome) = tokio::time::timeout(BOUND, run)
        .await
        .expect("deadline must end the turn");
    assert_event_order(&events);
    assert_history_valid(&outcome.messages);
    assert_eq!(outcome.reason, StopReason::Deadline);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("Partial answer from what finished.")
    );
}

/// A model server that answers the first call with a tool call and then never finishes
/// a reply again: it streams one word and goes silent (as a hostile server would).
struct StallingProvider {
    calls: std::sync::atomic::AtomicUsize,
}

impl buddy_core::Provider for StallingProvider {
    fn name(&self) -> &str {
        "stalling"
    }

    fn stream<'a>(
        &'a self,
        _request: buddy_core::CompletionRequest<'a>,
    ) -> buddy_core::BoxFuture<'a, Result<buddy_core::TokenStream, buddy_core::ProviderError>> {
        let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move {
            use futures::StreamExt;
            let first: Vec<Result<buddy_core::Token, buddy_core::ProviderError>> = if n == 0 {
                reply_tokens("", vec![call("c0", "fast", json!({}))])
            } else {
                vec![Ok(buddy_core::Token::Text {
                    text: "Thinking".into(),
                })]
            };
            let stalls = n > 0;
            let stream = futures::stream::iter(first).chain(futures::stream::poll_fn(move |_| {
                if stalls {
                    std::task::Poll::Pending
                } else {
                    std::task::Poll::Ready(None)
                }
            }));
            Ok(Box::pin(stream) as buddy_core::TokenStream)
        })
    }
}

#[tokio::test]
async fn the_finalize_call_after_a_deadline_has_its_own_grace_then_buddy_answers() {
    let provider = StallingProvider {
        calls: std::sync::atomic::AtomicUsize::new(0),
    };
    let engine = Engine::new(Arc::new(provider), Arc::new(slow_toolbox()));
    let policy = LoopPolicy {
        deadline_ms: Some(300),
        finalize_grace_ms: 200,
        ..LoopPolicy::default()
    };
    let run = engine.run_collect(TurnRequest::new("m", "go").with_policy(policy));
    let (events, outcome) = tokio::time::timeout(BOUND, run)
        .await
        .expect("deadline + grace must end the turn");
    assert_event_order(&events);
    assert_history_valid(&outcome.messages);
    assert_eq!(outcome.reason, StopReason::Deadline);
    // The stalled Finalize reply was given up after its grace: buddy's answer quotes
    // the result it had.
    let answer = outcome.answer.unwrap();
    assert!(answer.contains("What the tools returned"), "{answer}");
    assert_eq!(
        outcome.stats.model_calls, 3,
        "the call, the stalled one, Finalize"
    );
}

#[tokio::test]
async fn a_cancel_mid_reply_keeps_the_text_streamed_so_far_as_the_last_message() {
    let provider = StallingProvider {
        calls: std::sync::atomic::AtomicUsize::new(0),
    };
    let engine = Arc::new(Engine::new(Arc::new(provider), Arc::new(slow_toolbox())));
    let cancel = CancellationToken::new();
    let request = TurnRequest::new("m", "go").with_cancel(cancel.clone());
    let (mut rx, handle) = engine.spawn(request);
    let mut said = String::new();
    tokio::time::timeout(BOUND, async {
        while let Some(event) = rx.recv().await {
            if let ChatEvent::TextDelta { text } = &event {
                said.push_str(text);
                cancel.cancel();
            }
        }
    })
    .await
    .expect("the turn must end soon after cancellation");
    let outcome = handle.await.unwrap();
    assert_eq!(outcome.reason, StopReason::Cancelled);
    assert_history_valid(&outcome.messages);
    assert_eq!(said, "Thinking");
    // The tool round stays, and the reply the cancel cut short is the last message.
    assert!(
        matches!(
            outcome.messages.last(),
            Some(Message::Assistant { content: Some(text), tool_calls }) if *text == said && tool_calls.is_empty()
        ),
        "{:#?}",
        outcome.messages
    );
    assert!(
        outcome
            .messages
            .iter()
            .any(|m| matches!(m, Message::Tool { .. }))
    );
}
