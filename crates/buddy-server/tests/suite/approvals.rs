//! Approvals over HTTP: a turn pauses (stored), the server restarts, the client resumes
//! with each decision; a repeated or concurrent resume runs a call once; the OpenAI
//! endpoint refuses such calls; a capped turn continues with a fresh budget.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use buddy_core::{RepeatSemantics, ToolOutcome};
use buddy_engine::{ApprovalRules, PolicyConfig, PolicyPatch};
use buddy_scripted::{Scenario, ScriptedProvider};
use buddy_server::{AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::SqliteStore;
use buddy_testkit::{TestTool, TestToolbox};
use serde_json::{Value, json};

use super::sharing::events;
use super::{post, send};
use axum::body::Body;
use axum::http::{Request, StatusCode};

/// `scripted:writer` writes once then reports; `scripted:pager` reads pages 1, 2, 3.
pub(super) struct Writer {
    pub(super) toolbox: Arc<TestToolbox>,
}

const WRITER: &str = r#"{"name": "writer", "prompt": "", "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
  "rules": [
    {"when": {"round": 1}, "reply": {"text": "Saving it.", "tool_calls": [{"name": "write", "arguments": {"path": "haiku.txt"}}]}},
    {"when": {}, "reply": {"text": "Result: {last_result}"}}]}"#;

const PAGER: &str = r#"{"name": "pager", "prompt": "", "expect": {"stop_reason": "completed", "model_calls": 4, "tool_calls": 3},
  "rules": [
    {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "read", "arguments": {"page": 1}}]}},
    {"when": {"round": 3}, "reply": {"tool_calls": [{"name": "read", "arguments": {"page": 2}}]}},
    {"when": {"round": 4}, "reply": {"tool_calls": [{"name": "read", "arguments": {"page": 3}}]}},
    {"when": {}, "reply": {"text": "Pages read: {results}"}}]}"#;

impl Backend for Writer {
    fn models(&self) -> Vec<String> {
        vec!["scripted:writer".into(), "scripted:pager".into()]
    }

    fn resolve(
        &self,
        _provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<Resolved, BackendError> {
        let (name, script) = match model {
            Some("scripted:pager") => ("scripted:pager", PAGER),
            _ => ("scripted:writer", WRITER),
        };
        let scenario = Scenario::parse(script, "test").unwrap();
        Ok(Resolved {
            provider: Arc::new(ScriptedProvider::new(Arc::new(scenario))),
            toolbox: Arc::clone(&self.toolbox) as _,
            model: name.into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

pub(super) fn toolbox() -> Arc<TestToolbox> {
    Arc::new(
        TestToolbox::new()
            .with(
                "write",
                TestTool::new(|c, _| ToolOutcome::ok(format!("wrote {}", c.arguments)))
                    .semantics(RepeatSemantics::Effectful),
            )
            .with(
                "read",
                TestTool::new(|c, _| ToolOutcome::ok(format!("page {}", c.arguments)))
                    .semantics(RepeatSemantics::Pure),
            ),
    )
}

/// A server over the SQLite file `db` (a new one per call: a restart).
fn server(db: &Path, toolbox: &Arc<TestToolbox>) -> AppState {
    let settings = ServerSettings {
        approval: ApprovalRules::destructive(),
        openai_approval: ApprovalRules {
            unattended: true,
            ..ApprovalRules::destructive()
        },
        ..ServerSettings::default()
    };
    AppState::new(
        Arc::new(SqliteStore::open(db).unwrap()),
        Arc::new(Writer {
            toolbox: Arc::clone(toolbox),
        }),
        PolicyConfig::default(),
        settings,
    )
}

/// A server over a new database, and the count of executed calls.
fn fresh() -> (
    tempfile::TempDir,
    AppState,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    let dir = tempfile::tempdir().unwrap();
    let tools = toolbox();
    let executed = tools.executed();
    let state = server(&dir.path().join("buddy.db"), &tools);
    (dir, state, executed)
}

pub(super) fn last(body: &str) -> Value {
    events(body).last().map(|(_, v)| v.clone()).unwrap()
}

/// Starts a writer turn that pauses; returns the conversation id and the waiting call.
async fn paused(state: &AppState) -> (String, String) {
    let (status, body) = send(
        state,
        post(
            "/v1/chat",
            json!({"message": "write a haiku", "model": "scripted:writer"}),
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let events = events(&body);
    let conversation = events[0].1["conversation_id"].as_str().unwrap().to_owned();
    let waiting = events
        .iter()
        .find(|(name, _)| name == "approval_required")
        .unwrap_or_else(|| panic!("no approval_required event: {body}"));
    let call = &waiting.1["calls"][0];
    assert_eq!(call["name"], "write");
    assert!(call["why"].as_str().unwrap().contains("effectful"));
    assert_eq!(last(&body)["reason"], "approval_required");
    (conversation, call["id"].as_str().unwrap().to_owned())
}

fn resume(conversation: &str, body: Value) -> Request<Body> {
    post(
        &format!("/v1/conversations/{conversation}/resume"),
        body,
        None,
    )
}

async fn conversation(state: &AppState, id: &str) -> Value {
    let (_, body) = send(
        state,
        Request::get(format!("/v1/conversations/{id}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    serde_json::from_str(&body).unwrap()
}

#[tokio::test]
async fn a_pause_survives_a_restart_and_an_approved_call_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("buddy.db");
    let tools = toolbox();
    let executed = tools.executed();
    let (id, call) = paused(&server(&db, &tools)).await;
    assert_eq!(executed.load(Ordering::SeqCst), 0);

    // A new server over the same database: the pause is still there.
    let state = server(&db, &tools);
    let stored = conversation(&state, &id).await;
    assert_eq!(stored["turns"][0]["stop_reason"], "approval_required");
    let approve = json!({"decisions": [{"call_id": call, "decision": "approve"}]});
    let (status, body) = send(&state, resume(&id, approve.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(last(&body)["reason"], "completed", "{body}");
    assert_eq!(
        last(&body)["answer"],
        r#"Result: wrote {"path":"haiku.txt"}"#
    );
    assert_eq!(executed.load(Ordering::SeqCst), 1);

    // The same resume again: refused, nothing runs.
    let (status, body) = send(&state, resume(&id, approve)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("no calls waiting for approval"), "{body}");
    assert_eq!(executed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn two_resumes_at_once_run_the_call_once() {
    let (_dir, state, executed) = fresh();
    let (id, call) = paused(&state).await;
    let approve = json!({"decisions": [{"call_id": call, "decision": "approve"}]});
    let (a, b) = tokio::join!(
        send(&state, resume(&id, approve.clone())),
        send(&state, resume(&id, approve.clone()))
    );
    let mut statuses = [a.0, b.0];
    statuses.sort();
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::CONFLICT],
        "{a:?} {b:?}"
    );
    assert_eq!(executed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn reject_and_edit_reach_the_model() {
    let (_dir, state, executed) = fresh();

    let (id, call) = paused(&state).await;
    let reject = json!({"decisions": [{"call_id": call, "decision": "reject", "reason": "show it instead"}]});
    let (status, body) = send(&state, resume(&id, reject)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        last(&body)["answer"],
        "Result: not run: the user rejected this call: show it instead"
    );
    assert_eq!(executed.load(Ordering::SeqCst), 0);

    let (id, call) = paused(&state).await;
    let edit = json!({"decisions": [{"call_id": call, "decision": "edit", "arguments": {"path": "poems/haiku.txt"}}]});
    let (status, body) = send(&state, resume(&id, edit)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        last(&body)["answer"],
        r#"Result: wrote {"path":"poems/haiku.txt"}"#
    );
    assert_eq!(executed.load(Ordering::SeqCst), 1);
    let stored = conversation(&state, &id).await;
    let notes: Vec<&Value> = stored["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "note")
        .collect();
    assert!(
        notes[0]["content"]
            .as_str()
            .unwrap()
            .contains("changed the arguments")
    );
}

#[tokio::test]
async fn bad_resumes_are_clear_errors() {
    let (_dir, state, _) = fresh();
    let (id, _) = paused(&state).await;
    let (status, body) = send(&state, resume(&id, json!({}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("either `decisions`"), "{body}");
    let (status, _) = send(&state, resume("conv_nope", json!({"continue": true}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = send(&state, resume(&id, json!({"continue": true}))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(body.contains("not at a limit"), "{body}");
    let wrong = json!({"decisions": [{"call_id": "call_zz", "decision": "approve"}]});
    let (status, body) = send(&state, resume(&id, wrong)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(last(&body)["reason"], "invalid_request");
    assert!(last(&body)["message"].as_str().unwrap().contains("call_zz"));
}

#[tokio::test]
async fn the_openai_endpoint_refuses_calls_that_need_approval() {
    let (_dir, state, executed) = fresh();
    let (status, body) = send(
        &state,
        post(
            "/v1/chat/completions",
            json!({"model": "scripted:writer", "messages": [{"role": "user", "content": "write"}]}),
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let reply: Value = serde_json::from_str(&body).unwrap();
    let answer = reply["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(answer.contains("needs a person's approval"), "{answer}");
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");
    assert_eq!(executed.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_capped_turn_continues_with_a_fresh_budget() {
    let (_dir, state, executed) = fresh();
    let (status, body) = send(
        &state,
        post(
            "/v1/chat",
            json!({"message": "read the pages", "model": "scripted:pager", "policy": {"max_model_calls": 2}}),
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(last(&body)["reason"], "max_model_calls", "{body}");
    let id = events(&body)[0].1["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(executed.load(Ordering::SeqCst), 1);
    let (status, body) = send(&state, resume(&id, json!({"continue": true}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(last(&body)["reason"], "completed", "{body}");
    assert_eq!(
        executed.load(Ordering::SeqCst),
        3,
        "pages 2 and 3; page 1 not again"
    );
    let stored = conversation(&state, &id).await;
    assert_eq!(stored["turns"][1]["stop_reason"], "completed");
}
