//! What the engine gives providers for their prompt cache: one key for every call of a
//! conversation (the client's, or one derived from the conversation's start), a client's
//! cache breakpoints with every request that sends the history whole, and the cache's
//! share of the input in the turn's stats.

use std::sync::Arc;

use buddy_core::{CacheMark, CacheTtl, Message, Price, Token, ToolChoice, Usage};
use buddy_engine::{Engine, LoopPolicy, TurnRequest, conversation_cache_key};
use buddy_testkit::{RecordingProvider, ReplyProvider, TestTool, TestToolbox, reply_tokens};
use serde_json::json;

use super::call;

/// A model that calls `read` three times, then answers; each reply reports a cache read.
fn reading_model() -> ReplyProvider {
    ReplyProvider::new(|_, n| {
        let mut tokens = if n < 3 {
            reply_tokens("", vec![call(&format!("c{n}"), "read", json!({"n": n}))])
        } else {
            reply_tokens("done", vec![])
        };
        if let Some(Ok(Token::Finish { usage, .. })) = tokens.last_mut() {
            *usage = Some(Usage {
                input_tokens: 1_000,
                output_tokens: 10,
                cached_input_tokens: 800,
                cache_write_tokens: 150,
                cache_write_1h_tokens: 0,
            });
        }
        Ok(tokens)
    })
}

fn toolbox() -> TestToolbox {
    TestToolbox::new().with(
        "read",
        TestTool::new(|c, _| buddy_core::ToolOutcome::ok(format!("contents of {}", c.arguments))),
    )
}

#[tokio::test]
async fn every_call_of_a_conversation_sends_one_cache_key() {
    let provider = RecordingProvider::new(reading_model());
    let requests = provider.requests();
    let engine = Engine::new(Arc::new(provider), Arc::new(toolbox()));
    let system = vec![Message::system("be brief")];
    let first = TurnRequest::new("m", "read three things").with_history(system.clone());
    let (_, outcome) = engine.run_collect(first).await;
    let expected = conversation_cache_key(&system, Some("read three things"));
    // A later turn of the same conversation: the same key.
    let second = TurnRequest::new("m", "and again?").with_history(outcome.messages);
    engine.run_collect(second).await;
    let keys: Vec<Option<String>> = requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.cache_key.clone())
        .collect();
    assert_eq!(
        keys.len(),
        5,
        "four calls, then one (the model has read everything)"
    );
    assert!(
        keys.iter().all(|k| k.as_deref() == Some(expected.as_str())),
        "{keys:?}"
    );
    // A client's own key wins.
    let provider = RecordingProvider::new(reading_model());
    let requests = provider.requests();
    let engine = Engine::new(Arc::new(provider), Arc::new(toolbox()));
    let mut request = TurnRequest::new("m", "read");
    request.cache_key = Some("client-key".into());
    engine.run_collect(request).await;
    assert!(
        requests
            .lock()
            .unwrap()
            .iter()
            .all(|r| r.cache_key.as_deref() == Some("client-key"))
    );
}

#[tokio::test]
async fn a_clients_breakpoints_go_with_every_whole_request_and_the_stats_count_the_cache() {
    let provider = RecordingProvider::new(reading_model());
    let requests = provider.requests();
    let engine = Engine::new(Arc::new(provider), Arc::new(toolbox()));
    let marks = vec![CacheMark {
        message: 1,
        ttl: CacheTtl::FiveMinutes,
    }];
    let mut request = TurnRequest::new("claude-sonnet-4-5", "read")
        .with_history(vec![
            Message::system("s"),
            Message::user("earlier"),
            Message::assistant("ok"),
        ])
        .with_price(Some(Price {
            cached_input: Some(0.3),
            cache_write: Some(3.75),
            ..Price::new(3.0, 15.0)
        }));
    request.cache_marks = marks.clone();
    let (_, outcome) = engine.run_collect(request).await;
    for sent in requests.lock().unwrap().iter() {
        assert_eq!(sent.cache_marks, marks);
        assert_eq!(
            sent.messages[1],
            Message::user("earlier"),
            "the mark names this message"
        );
    }
    let stats = outcome.stats;
    assert_eq!(stats.model_calls, 4);
    assert_eq!(
        (
            stats.input_tokens,
            stats.cache_read_tokens,
            stats.cache_write_tokens
        ),
        (4_000, 3_200, 600)
    );
    // Per call: 50 × 3 + 800 × 0.3 + 150 × 3.75 + 10 × 15 = 1,102.5 millionths of a dollar.
    assert_eq!(
        stats.cost_usd,
        buddy_core::Usd::from_dollars(4.0 * 1_102.5 / 1e6)
    );
}

#[tokio::test]
async fn the_final_answer_call_keeps_the_tools_defined_but_not_callable() {
    // A model that never stops calling, capped at 3 calls: the third is Finalize.
    let provider = RecordingProvider::new(ReplyProvider::new(|_, n| {
        Ok(reply_tokens(
            "",
            vec![call(&format!("c{n}"), "read", json!({"n": n}))],
        ))
    }));
    let requests = provider.requests();
    let engine = Engine::new(Arc::new(provider), Arc::new(toolbox()));
    let policy = LoopPolicy {
        max_model_calls: 3,
        ..LoopPolicy::default()
    };
    engine
        .run_collect(TurnRequest::new("m", "read").with_policy(policy))
        .await;
    let requests = requests.lock().unwrap();
    let last = requests.last().unwrap();
    assert_eq!(last.tool_choice, Some(ToolChoice::None));
    assert_eq!(last.tools, requests[0].tools, "the same tool list");
    // The previous request is the final call's prefix: its instruction is appended.
    let before = &requests[requests.len() - 2].messages;
    assert!(last.messages.starts_with(before));
}
