//! What a person sends to a running turn reaches it through any instance: two instances
//! on one PostgreSQL, the client alternating between them. A turn started on A asks a
//! question (MCP elicitation) that B answers, with the same status codes as A would give
//! (404 for another key's turn or an unknown question, 400 for a form not filled in,
//! 409 for a question answered already); a turn paused for approval on A is approved
//! on B; a cancel sent to B stops the turn on A (`instances.rs`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::http::StatusCode;
use buddy_engine::{ApprovalRules, PolicyConfig};
use buddy_server::{ApiKey, AppState, Backend, ServerSettings};
use buddy_store::PgStore;
use serde_json::json;

use super::approvals::{Writer, toolbox};
use super::elicitations::{AskingBackend, Frames, answer};
use super::reattach::open;
use super::sharing::events;
use super::{post, send};

/// Keys of these tests alone: the database is shared with `instances.rs`, whose per-key
/// cap counts its own keys' turns.
const ALICE: &str = "sk-live-CCCCCCCCCCCC";
const BOB: &str = "sk-live-DDDDDDDDDDDD";

/// One instance over the PostgreSQL `scripts/test.sh` started, with `backend`.
async fn instance(backend: Arc<dyn Backend>, approval: ApprovalRules) -> AppState {
    let url = std::env::var("BUDDY_TEST_POSTGRES_URL")
        .expect("BUDDY_TEST_POSTGRES_URL is not set: run the suite with scripts/test.sh");
    let store = PgStore::connect(&url).await.unwrap();
    let settings = ServerSettings {
        api_keys: vec![
            ApiKey::new(ALICE, None, false),
            ApiKey::new(BOB, Some("bob"), false),
        ],
        approval,
        ..ServerSettings::default()
    };
    AppState::shared(
        Arc::new(store.clone()),
        Arc::new(store),
        backend,
        PolicyConfig::default(),
        settings,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_asked_on_one_instance_is_answered_on_the_other() {
    let (a, b) = (
        instance(Arc::new(AskingBackend), ApprovalRules::default()).await,
        instance(Arc::new(AskingBackend), ApprovalRules::default()).await,
    );
    let (status, body) = open(
        &a,
        post("/v1/chat", json!({"message": "sign me up"}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let mut stream = Frames::new(body);
    let frames = stream.until(Some("elicitation_required")).await;
    assert_eq!(
        frames.last().map(|f| f.name.as_str()),
        Some("elicitation_required"),
        "{:?}",
        frames
            .iter()
            .map(|f| (&f.name, &f.data))
            .collect::<Vec<_>>()
    );
    let turn = frames[0].data["turn_id"].as_str().unwrap().to_owned();
    let id = frames.last().unwrap().data["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Through B: Bob does not see Alice's turn; an unknown question is 404 as on A.
    let accept = json!({"action": "accept", "content": {"name": "Ada"}});
    let (status, _) = answer(&b, &turn, &id, accept.clone(), BOB).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, reply) = answer(&b, &turn, "elicit_999", accept.clone(), ALICE).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{reply}");
    assert!(reply.to_string().contains("elicit_999"), "{reply}");
    // A form not filled in is refused by A's check, named, and the question stays open.
    let (status, reply) = answer(
        &b,
        &turn,
        &id,
        json!({"action": "accept", "content": {}}),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
    assert!(reply.to_string().contains("name"), "{reply}");
    // Answered through B: taken by the turn on A, and a second answer is 409.
    let (status, reply) = answer(&b, &turn, &id, accept.clone(), ALICE).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(
        reply,
        json!({"turn_id": turn, "id": id, "action": "accept"})
    );
    let (status, reply) = answer(&b, &turn, &id, accept.clone(), ALICE).await;
    assert_eq!(status, StatusCode::CONFLICT, "{reply}");
    // The second question, answered on A this time, then the turn completes.
    let frames = stream.until(Some("elicitation_required")).await;
    let second = frames.last().unwrap().data["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(second, id);
    let (status, _) = answer(&a, &turn, &second, json!({"action": "decline"}), ALICE).await;
    assert_eq!(status, StatusCode::OK);
    let frames = stream.until(Some("done")).await;
    let done = frames.last().unwrap();
    assert_eq!(done.data["reason"], "completed", "{:?}", done.data);
    let answer_text = done.data["answer"].as_str().unwrap();
    assert!(
        answer_text.contains("Ada") && answer_text.contains("decline"),
        "{answer_text}"
    );
    // The turn is over: an answer through either instance is 404.
    for at in [&a, &b] {
        let (status, _) = answer(at, &turn, &second, accept.clone(), ALICE).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_paused_for_approval_on_one_instance_is_approved_on_the_other() {
    let tools = toolbox();
    let executed = tools.executed();
    let writer = || -> Arc<dyn Backend> {
        Arc::new(Writer {
            toolbox: Arc::clone(&tools),
        })
    };
    let (a, b) = (
        instance(writer(), ApprovalRules::destructive()).await,
        instance(writer(), ApprovalRules::destructive()).await,
    );
    let (status, body) = send(
        &a,
        post(
            "/v1/chat",
            json!({"message": "write a haiku", "model": "scripted:writer"}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let seen = events(&body);
    let conversation = seen[0].1["conversation_id"].as_str().unwrap().to_owned();
    let (_, waiting) = seen
        .iter()
        .find(|(name, _)| name == "approval_required")
        .unwrap_or_else(|| panic!("no approval_required event: {body}"));
    let call = waiting["calls"][0]["id"].as_str().unwrap().to_owned();
    let resume = |key: &str| {
        post(
            &format!("/v1/conversations/{conversation}/resume"),
            json!({"decisions": [{"call_id": call, "decision": "approve"}]}),
            Some(key),
        )
    };
    // Bob cannot approve Alice's call, on either instance.
    let (status, _) = send(&b, resume(BOB)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = send(&b, resume(ALICE)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let end = events(&body).last().cloned().unwrap();
    assert_eq!(end.1["reason"], "completed", "{body}");
    assert_eq!(end.1["answer"], r#"Result: wrote {"path":"haiku.txt"}"#);
    assert_eq!(executed.load(Ordering::SeqCst), 1);
    // Answered already: the same approval through A is 409, and nothing runs again.
    let (status, body) = send(&a, resume(ALICE)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(executed.load(Ordering::SeqCst), 1);
}
