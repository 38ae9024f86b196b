//! Memory a client can make the server keep after its turns end (issue 46, items 3 and
//! 8): ended turns' logs stay within `retained_events_bytes` together, the oldest going
//! first (a reattach to one gets the usual "gone" answer), and a response's instructions
//! are held once however many of its events repeat them.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use buddy_engine::PolicyConfig;
use buddy_server::{AppState, ServerSettings};
use buddy_store::SqliteStore;
use serde_json::json;

use super::sharing::events;
use super::{Hello, post, send};

fn server(budget: usize) -> AppState {
    let settings = ServerSettings {
        retained_events_bytes: budget,
        ..ServerSettings::default()
    };
    AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Hello),
        PolicyConfig::default(),
        settings,
    )
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

#[tokio::test]
async fn ended_turns_logs_stay_within_the_budget_the_oldest_going_first() {
    // About 600 bytes a turn: a budget of 6,000 keeps the last few.
    let state = server(6_000);
    let mut turns = Vec::new();
    for _ in 0..40 {
        let (status, text) = send(&state, post("/v1/chat", json!({"message": "hi"}), None)).await;
        assert_eq!(status, StatusCode::OK);
        turns.push(events(&text)[0].1["turn_id"].as_str().unwrap().to_owned());
    }
    state.wait_for_turns().await;
    let mut kept = Vec::new();
    for turn in &turns {
        let (status, body) = send(&state, get(&format!("/v1/turns/{turn}/events"))).await;
        match status {
            StatusCode::OK => kept.push(turn.clone()),
            StatusCode::NOT_FOUND => {
                assert!(body.contains("Read its conversation instead"), "{body}")
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert!(
        (3..=12).contains(&kept.len()),
        "a few kept, not all 40: {}",
        kept.len()
    );
    assert_eq!(
        kept[..],
        turns[turns.len() - kept.len()..],
        "the newest are kept"
    );
}

#[tokio::test]
async fn a_responses_instructions_are_held_once_and_streamed_as_sent() {
    // 200 KB of instructions, repeated by three lifecycle events of each response: held
    // once, four responses fit a 1 MB budget (three copies each would need 2.4 MB).
    let state = server(1 << 20);
    let instructions = "Answer in one word. ".repeat(10_000);
    let mut streams = Vec::new();
    for _ in 0..4 {
        let body = json!({"model": "scripted:hello", "input": "hi", "stream": true,
            "store": false, "instructions": instructions});
        let (status, text) = send(&state, post("/v1/responses", body, None)).await;
        assert_eq!(status, StatusCode::OK, "{}", &text[..text.len().min(300)]);
        let id = events(&text)[0].1["response"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let repeats = events(&text)
            .iter()
            .filter(|(_, data)| data["response"]["instructions"] == instructions.as_str())
            .count();
        assert!(repeats >= 3, "{repeats}");
        streams.push((id, text));
    }
    state.wait_for_turns().await;
    for (id, original) in &streams {
        let (status, again) = send(&state, get(&format!("/v1/responses/{id}?stream=true"))).await;
        assert_eq!(status, StatusCode::OK, "{id} was forgotten");
        assert_eq!(
            events(&again),
            events(original),
            "the same events, instructions and all"
        );
    }
}
