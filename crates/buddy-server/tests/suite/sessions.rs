//! Client sessions kept as conversations (issue 54, item 6): a Claude Code session that
//! names itself (`x-claude-code-session-id`) is one conversation of its key with every
//! round trip's turn, its tool calls and stop reasons, which replays like buddy's own;
//! its sub-agents' threads keep conversations of their own; a request that names no
//! session, or a server set not to keep them, stores nothing.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use buddy_core::Message;
use buddy_server::{ApiKey, ServerSettings};
use buddy_store::{Conversations, SqliteStore, Store, TurnEnd};
use serde_json::{Value, json};

use super::messages::{bash_tool, calls_bash, send, server_on};

const KEY: &str = "sk-session";

/// A Messages request of key `KEY`, in session `session` when one is given.
fn request(body: &Value, session: Option<&str>) -> Request<Body> {
    let mut builder = Request::post("/v1/messages")
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .header("x-api-key", KEY);
    if let Some(session) = session {
        builder = builder.header("x-claude-code-session-id", session);
    }
    builder.body(Body::from(body.to_string())).unwrap()
}

fn settings(keep: bool) -> ServerSettings {
    ServerSettings {
        api_keys: vec![ApiKey::new(KEY, None, false)],
        keep_client_sessions: keep,
        ..ServerSettings::default()
    }
}

/// Plays one thread of a session: the question, the client's tool run, the answer (the
/// replies' stop reasons checked on the way).
async fn thread(state: &buddy_server::AppState, session: Option<&str>, question: &str) {
    let mut history = vec![json!({"role": "user", "content": question})];
    let body = json!({"model": "claude-test", "max_tokens": 100, "tools": bash_tool(), "messages": history});
    let first = send(state, request(&body, session)).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let reply: Value = serde_json::from_str(&first.body).unwrap();
    assert_eq!(reply["stop_reason"], "tool_use", "{reply}");
    let call = reply["content"][1]["id"].clone();
    history.push(json!({"role": "assistant", "content": reply["content"]}));
    history.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call, "content": "a.txt b.txt"}]}));
    let body = json!({"model": "claude-test", "max_tokens": 100, "tools": bash_tool(), "messages": history});
    let second = send(state, request(&body, session)).await;
    let reply: Value = serde_json::from_str(&second.body).unwrap();
    assert_eq!(reply["stop_reason"], "end_turn", "{reply}");
}

#[tokio::test]
async fn a_claude_code_session_is_one_conversation_of_its_key_with_every_round_trips_turn() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let (state, _) = server_on(
        Arc::clone(&store) as Arc<dyn Store>,
        settings(true),
        calls_bash,
    );
    thread(&state, Some("5b1e0c2a-7f41"), "What is here?").await;
    let owner = ApiKey::new(KEY, None, false).owner();
    let listed = store.list_conversations(Some(&owner)).await.unwrap();
    assert_eq!(listed.len(), 1, "one conversation for the session");
    let kept = store
        .get_conversation(&listed[0].id)
        .await
        .unwrap()
        .unwrap();
    let key = kept.settings["metadata"]["buddy_session"].as_str().unwrap();
    assert!(key.starts_with("5b1e0c2a-7f41#"), "{key}");
    let roles: Vec<&str> = kept
        .messages
        .iter()
        .map(|m| match m {
            Message::User { .. } => "user",
            Message::Assistant { tool_calls, .. } if tool_calls.is_empty() => "answer",
            Message::Assistant { .. } => "calls",
            Message::Tool { .. } => "result",
            Message::System { .. } => "system",
            Message::Note { .. } => "note",
        })
        .collect();
    assert_eq!(roles, ["user", "calls", "result", "answer"]);
    assert_eq!(kept.turns.len(), 2, "a turn per round trip");
    let ends: Vec<Option<TurnEnd>> = kept.turns.iter().map(|t| t.stop_reason).collect();
    assert!(ends.iter().all(Option::is_some), "{ends:?}");
    assert!(kept.turns.iter().all(|t| t.model == "claude-test"));

    // Its turns replay like buddy's own.
    let replay = Request::post(format!("/v1/conversations/{}/replay", kept.id))
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {KEY}"))
        .body(Body::from("{}"))
        .unwrap();
    let replayed = send(&state, replay).await;
    assert_eq!(replayed.status, StatusCode::OK, "{}", replayed.body);
    let replayed: Value = serde_json::from_str(&replayed.body).unwrap();
    let turns = replayed["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    assert!(turns.iter().all(|t| t["error"].is_null()), "{replayed}");

    // A sub-agent's thread of the same session keeps a conversation of its own.
    thread(&state, Some("5b1e0c2a-7f41"), "Find the failing test.").await;
    assert_eq!(
        store.list_conversations(Some(&owner)).await.unwrap().len(),
        2
    );
    // The main thread goes on in its own conversation.
    let again = store.get_conversation(&kept.id).await.unwrap().unwrap();
    assert_eq!(again.turns.len(), 2);
}

#[tokio::test]
async fn without_a_session_or_with_keeping_off_nothing_is_stored() {
    for (keep, session) in [(true, None), (false, Some("5b1e0c2a-7f41"))] {
        let store = Arc::new(SqliteStore::in_memory().unwrap());
        let (state, calls) = server_on(
            Arc::clone(&store) as Arc<dyn Store>,
            settings(keep),
            calls_bash,
        );
        thread(&state, session, "What is here?").await;
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert!(store.list_conversations(None).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn a_rewritten_history_starts_a_new_conversation_of_the_session() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let (state, _) = server_on(
        Arc::clone(&store) as Arc<dyn Store>,
        settings(true),
        calls_bash,
    );
    thread(&state, Some("s-rewrite"), "What is here?").await;
    // The client compacted: the same first message, a reply buddy never gave.
    let history = json!([
        {"role": "user", "content": "What is here?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Summary of the session so far."}]},
        {"role": "user", "content": "Go on."}]);
    let body = json!({"model": "claude-test", "max_tokens": 100, "messages": history});
    let sent = send(&state, request(&body, Some("s-rewrite"))).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    let listed = store.list_conversations(None).await.unwrap();
    assert_eq!(
        listed.len(),
        2,
        "the rewritten history is a conversation of its own"
    );
    let newest = store
        .get_conversation(&listed[0].id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(newest.messages.len(), 4, "{:?}", newest.messages);
    assert_eq!(newest.turns.len(), 1);
}

/// A `store: false` Responses request of key `KEY`, in codex's session `session`.
fn codex_request(body: &Value, session: &str) -> Request<Body> {
    Request::post("/v1/responses")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {KEY}"))
        .header("session-id", session)
        .body(Body::from(body.to_string()))
        .unwrap()
}

#[tokio::test]
async fn a_codex_session_of_store_false_requests_is_one_conversation_its_responses_unstored() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    let (state, _) = server_on(
        Arc::clone(&store) as Arc<dyn Store>,
        settings(true),
        calls_bash,
    );
    let mut input = vec![json!({"type": "message", "role": "user", "content": "What is here?"})];
    let exec = json!([{"type": "function", "name": "Bash", "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}]);
    let body = json!({"model": "claude-test", "store": false, "tools": exec, "input": input});
    let first = send(&state, codex_request(&body, "0199a1b2-c3d4")).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let reply: Value = serde_json::from_str(&first.body).unwrap();
    let call = reply["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "function_call")
        .cloned()
        .unwrap_or_else(|| panic!("{reply}"));
    input.push(call.clone());
    input.push(json!({"type": "function_call_output", "call_id": call["call_id"], "output": "a.txt b.txt"}));
    let body = json!({"model": "claude-test", "store": false, "tools": exec, "input": input});
    let second = send(&state, codex_request(&body, "0199a1b2-c3d4")).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.body);
    let reply: Value = serde_json::from_str(&second.body).unwrap();
    assert_eq!(reply["status"], "completed", "{reply}");

    let listed = store.list_conversations(None).await.unwrap();
    assert_eq!(listed.len(), 1, "the session is one conversation");
    let kept = store
        .get_conversation(&listed[0].id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.turns.len(), 2);
    let key = kept.settings["metadata"]["buddy_session"].as_str().unwrap();
    assert!(key.starts_with("0199a1b2-c3d4#"), "{key}");
    // `store: false` still means the response is not read back by id.
    let id = reply["id"].as_str().unwrap();
    let read = Request::get(format!("/v1/responses/{id}"))
        .header("authorization", format!("Bearer {KEY}"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&state, read).await.status, StatusCode::NOT_FOUND);
}
