//! Token counts kept with a stored conversation: a turn stores each message it adds with
//! its count, and the next turn takes those counts instead of counting again.

use std::sync::Arc;

use buddy_core::{Message, TokenCount};
use buddy_engine::PolicyConfig;
use buddy_server::{AppState, ServerSettings};
use buddy_store::prelude::*;
use buddy_store::{SqliteStore, Store};
use serde_json::{Value, json};

use super::{Hello, post, send};

/// The `context_tokens` of each model call of a `/v1/chat` stream.
fn context_tokens(body: &str) -> Vec<u64> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|d| d["context_tokens"].as_u64())
        .collect()
}

#[tokio::test]
async fn a_continued_conversation_is_not_counted_again() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let state = AppState::new(
        Arc::clone(&store) as Arc<dyn Store>,
        Arc::new(Hello),
        PolicyConfig::default(),
        ServerSettings::default(),
    );
    // The stream ends once the turn is stored.
    let (_, first) = send(&state, post("/v1/chat", json!({"message": "hi"}), None)).await;
    let id = store.list_conversations(None).await.unwrap()[0].id.clone();
    let kept = store.load_counted(&id).await.unwrap();
    // The system prompt is written before the turn, uncounted; the turn's own messages
    // carry the count the engine made.
    assert_eq!(kept.messages.len(), 3);
    assert_eq!(kept.counts[0], None);
    let key = format!("estimate/{}", buddy_engine::context::COUNT_FORMULA);
    let counter = buddy_engine::context::counter_for_model("scripted:hello");
    for (message, count) in kept.messages.iter().zip(&kept.counts).skip(1) {
        assert_eq!(
            count.as_ref(),
            Some(&TokenCount {
                encoding: key.clone(),
                tokens: counter.message(message) as u64,
            }),
            "{message:?}"
        );
    }

    // The next turn fits the window with the counts kept: one made larger than any window
    // has the message it belongs to left out of the request, which a recount would not.
    let count = |tokens| {
        Some(TokenCount {
            encoding: key.clone(),
            tokens,
        })
    };
    let history = [Message::user("hi"), Message::assistant("Hello there.")];
    let exact: Vec<_> = history
        .iter()
        .map(|m| count(counter.message(m) as u64))
        .collect();
    let continued = |counts: Vec<Option<TokenCount>>| {
        let (store, state, history) = (&store, &state, &history);
        async move {
            let id = store.create_conversation("anonymous").await.unwrap();
            store
                .append_counted(&id, "t0", history, &counts)
                .await
                .unwrap();
            let body = json!({"message": "again", "conversation_id": id});
            send(state, post("/v1/chat", body, None)).await.1
        }
    };
    let as_counted = continued(exact.clone()).await;
    let as_kept = continued(vec![count(u64::MAX / 4), exact[1].clone()]).await;
    assert_eq!(left_out(&as_counted), Vec::<String>::new(), "{as_counted}");
    let said = left_out(&as_kept);
    assert_eq!(said.len(), 1, "{as_kept}");
    assert!(
        said[0].starts_with("2 earlier message(s) left out"),
        "{said:?}"
    );
    // The provider's own count of each request is what the stream reports.
    assert!(!context_tokens(&first).is_empty());
    assert_eq!(context_tokens(&as_counted).len(), 1);
}

/// What the context-window guard said it left out, in a `/v1/chat` stream.
fn left_out(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|d| d["detail"].as_str().map(str::to_owned))
        .filter(|d| d.contains("left out"))
        .collect()
}
