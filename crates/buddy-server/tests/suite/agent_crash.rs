//! A sub-agent tree survives a crash like a single turn (issue 59 item 4): the task a
//! sub-agent's call became is recorded with the conversation (under the agent call),
//! and the next turn after a restart over the same store waits on that task again: what
//! it returns is the agent call's result, not an "interrupted".

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use buddy_core::{
    BoxFuture, Message, Provider, RecordedTask, RepeatSemantics, SkillContext, ToolCall,
    ToolOutcome, ToolSpec, Toolbox,
};
use buddy_engine::{AgentSet, AgentSpec, PolicyConfig, PolicyPatch};
use buddy_server::{AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::{SqliteStore, Store};
use buddy_testkit::{ReplyProvider, reply_tokens};
use serde_json::json;

use super::elicitations::Frames;
use super::reattach::open;
use super::sharing::events;
use super::{post, send};

/// `export`: a call becomes task `t-<call id>`, recorded, and then runs until the
/// process dies (this one never answers); a task is waited on again by its id.
struct Exports {
    specs: Vec<ToolSpec>,
    resumed: Mutex<Vec<String>>,
}

impl Toolbox for Exports {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }
    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        (name == "export").then_some(RepeatSemantics::Effectful)
    }
    fn invoke<'a>(&'a self, _: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let task = RecordedTask {
                server: "jobs".into(),
                task_id: format!("t-{}", ctx.call_id),
            };
            if let Some(log) = &ctx.tasks {
                log.created(&ctx.call_id, &task).await;
            }
            std::future::pending::<()>().await;
            ToolOutcome::ok("never")
        })
    }
    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        task: &'a RecordedTask,
        _: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        self.resumed
            .lock()
            .unwrap()
            .push(format!("{}:{}", call.name, task.task_id));
        let id = task.task_id.clone();
        Some(Box::pin(async move {
            ToolOutcome::ok(format!("exported 48,213 rows ({id})"))
        }))
    }
}

/// The caller hands the export to `helper` (call a1) and answers with what came back;
/// the helper (its instructions say "child agent") calls `export` (c5).
struct Tree {
    tools: Arc<Exports>,
}

impl Backend for Tree {
    fn models(&self) -> Vec<String> {
        vec!["m".into()]
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        let provider: Arc<dyn Provider> = Arc::new(ReplyProvider::new(|request, _| {
            let child = request.messages.iter().any(
                |m| matches!(m, Message::System { content, .. } if content.contains("child agent")),
            );
            let result = request.messages.iter().rev().find_map(|m| match m {
                Message::Tool { content, .. } => Some(content.clone()),
                _ => None,
            });
            Ok(match (child, result) {
                (true, _) => reply_tokens("", vec![ToolCall::new("c5", "export", "{}")]),
                (false, None) => reply_tokens(
                    "",
                    vec![ToolCall::new("a1", "helper", r#"{"task": "export it"}"#)],
                ),
                (false, Some(result)) => reply_tokens(&format!("Done: {result}"), vec![]),
            })
        }));
        let helper = AgentSpec {
            name: "helper".into(),
            description: "Exports.".into(),
            instructions: "You are a child agent.".into(),
            skills: vec!["export".into()],
            ..AgentSpec::default()
        };
        let set = AgentSet::new(
            vec![helper],
            Arc::clone(&self.tools) as Arc<dyn Toolbox>,
            Arc::clone(&provider),
            HashMap::new(),
        )
        .map_err(|e| BackendError(e.to_string()))?;
        Ok(Resolved {
            provider,
            toolbox: set.toolbox(),
            model: "m".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

/// A server over the SQLite file `db` (a new one per call: a restart).
fn server(db: &Path) -> (AppState, Arc<Exports>, Arc<dyn Store>) {
    let tools = Arc::new(Exports {
        specs: vec![ToolSpec {
            name: "export".into(),
            description: "Exports.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }],
        resumed: Mutex::default(),
    });
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(db).unwrap());
    let state = AppState::new(
        Arc::clone(&store),
        Arc::new(Tree {
            tools: Arc::clone(&tools),
        }),
        PolicyConfig::default(),
        ServerSettings::default(),
    );
    (state, tools, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agents_task_running_at_a_crash_is_waited_on_again_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("buddy.db");
    let (first, _, store) = server(&db);
    let (status, body) = open(
        &first,
        post("/v1/chat", json!({"message": "export it"}), None),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let mut stream = Frames::new(body);
    let opening = stream.until(Some("conversation")).await;
    let conversation = opening[0].data["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The helper's export became a task, recorded under the agent call; then the
    // process "dies" (its turn never ends; a new server opens the same file).
    let mut recorded = HashMap::new();
    for _ in 0..200 {
        recorded = store.call_tasks(&conversation).await.unwrap();
        if !recorded.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        recorded.get("a1/export/c5").map(|t| t.task_id.as_str()),
        Some("t-c5"),
        "{recorded:?}"
    );
    let (restarted, tools, _) = server(&db);
    let (status, body) = send(
        &restarted,
        post(
            "/v1/chat",
            json!({"conversation_id": conversation, "message": "and?"}),
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let seen = events(&body);
    let (_, done) = seen.last().unwrap();
    assert_eq!(done["reason"], "completed", "{body}");
    assert!(
        done["answer"]
            .as_str()
            .unwrap()
            .contains("exported 48,213 rows (t-c5)"),
        "{body}"
    );
    let (_, result) = seen
        .iter()
        .find(|(name, data)| name == "tool_call_result" && data["id"] == "a1")
        .unwrap_or_else(|| panic!("no result for the agent call: {body}"));
    assert_eq!(result["is_error"], false, "{result}");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("interrupted by a restart"),
        "{result}"
    );
    // Only the recorded task was asked about again; the export did not run twice.
    assert_eq!(*tools.resumed.lock().unwrap(), ["export:t-c5"]);
    drop(stream);
}
