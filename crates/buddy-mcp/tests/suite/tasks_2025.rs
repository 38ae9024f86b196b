//! Task-augmented calls of MCP 2025-11-25: server-everything's task-only
//! `simulate-research-query` runs to its result through buddy (created, polled, its
//! result taken); a call given up cancels its task; a task-only tool whose server
//! refuses buddy's task-augmented call is left out, with the reason.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use buddy_core::{Progress, ProgressSink, Skill};
use buddy_mcp::{McpServerConfig, McpSkill, McpSource};
use serde_json::json;

use super::{npm_server, test_server};

#[derive(Debug, Default)]
struct Seen(Mutex<Vec<Progress>>);

impl ProgressSink for Seen {
    fn report(&self, update: Progress) {
        self.0.lock().unwrap().push(update);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everythings_task_only_tool_runs_to_its_result() {
    let server = npm_server("mcp-server-everything");
    let source = McpSource::new(McpServerConfig::stdio("everything", &[&server]));
    let skills = McpSkill::all(Arc::clone(&source)).await.unwrap();
    let names: Vec<&str> = skills.iter().map(|s| s.name()).collect();
    assert!(
        names.contains(&"everything__simulate-research-query"),
        "{names:?}"
    );
    let seen = Arc::new(Seen::default());
    let skill = skills
        .iter()
        .find(|s| s.name() == "everything__simulate-research-query")
        .unwrap();
    let ctx = buddy_core::SkillContext {
        progress: Some(seen.clone()),
        ..buddy_core::SkillContext::default()
    };
    let text = tokio::time::timeout(
        Duration::from_secs(30),
        skill.execute(json!({"topic": "tides"}), ctx),
    )
    .await
    .expect("the task ends within 30 s")
    .unwrap();
    assert!(text.contains("# Research Report: tides"), "{text}");
    // Its stages reached the caller as the task's status messages.
    let messages: Vec<String> = seen
        .0
        .lock()
        .unwrap()
        .iter()
        .filter_map(|p| p.message.clone())
        .collect();
    assert!(
        messages.iter().any(|m| m.starts_with("Analyzing content")),
        "{messages:?}"
    );
    // The second call goes out as a task at once.
    let text = source
        .call("simulate-research-query", json!({"topic": "reefs"}))
        .await
        .unwrap();
    assert!(text.contains("# Research Report: reefs"), "{text}");
}

/// Answers every question with one interpretation, keeping what it was asked.
#[derive(Debug, Default)]
struct Historian(Mutex<Vec<String>>);

impl buddy_core::Elicitor for Historian {
    fn ask(
        &self,
        request: buddy_core::ElicitationRequest,
    ) -> buddy_core::BoxFuture<'_, buddy_core::ElicitationAnswer> {
        self.0.lock().unwrap().push(request.message);
        let content = json!({"interpretation": "historical"});
        Box::pin(async move {
            buddy_core::ElicitationAnswer::Accept {
                content: content.as_object().cloned().unwrap(),
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_needs_input_asks_the_person_while_its_result_is_awaited() {
    let server = npm_server("mcp-server-everything");
    let source = McpSource::new(McpServerConfig::stdio("everything", &[&server]));
    source.start().await.unwrap();
    let historian = Arc::new(Historian::default());
    let text = tokio::time::timeout(
        Duration::from_secs(30),
        source.call_asking(
            "simulate-research-query",
            json!({"topic": "tides", "ambiguous": true}),
            Some(historian.clone()),
        ),
    )
    .await
    .expect("the task ends within 30 s")
    .unwrap();
    assert!(
        text.contains("# Research Report: tides (historical)"),
        "{text}"
    );
    let asked = historian.0.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains("could have multiple interpretations"),
        "{asked:?}"
    );
}

fn log_of(dir: &tempfile::TempDir) -> Vec<String> {
    std::fs::read_to_string(dir.path().join("asked.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn tasks_server(dir: &tempfile::TempDir, mode: &str) -> Arc<McpSource> {
    let log = dir.path().join("asked.log").display().to_string();
    let script = test_server("tasks_2025_server.py");
    McpSource::new(McpServerConfig::stdio(
        "tasks",
        &["python3", &script, &log, mode],
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_given_up_cancels_its_task() {
    let dir = tempfile::tempdir().unwrap();
    let source = tasks_server(&dir, "tasks");
    source.start().await.unwrap();
    let calling = Arc::clone(&source);
    let call = tokio::spawn(async move { calling.call("slow", json!({})).await });
    let mut waited = 0;
    while !log_of(&dir).iter().any(|l| l.starts_with("task slow")) {
        assert!(waited < 100, "no task was made: {:?}", log_of(&dir));
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    // The turn is cancelled: the call's future is dropped.
    call.abort();
    let mut waited = 0;
    while !log_of(&dir).contains(&"cancel t-1".to_owned()) {
        assert!(
            waited < 100,
            "the task was not cancelled: {:?}",
            log_of(&dir)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    // The tool declared it takes only tasks: its first call was one.
    let log = log_of(&dir);
    assert!(log[0].starts_with("task slow t-1 ttl "), "{log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_refuses_a_plain_call_for_want_of_a_task_is_called_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let source = tasks_server(&dir, "tasks");
    source.start().await.unwrap();
    let text = source.call("sneaky", json!({})).await.unwrap();
    assert_eq!(text, "sneaky done");
    let text = source.call("sneaky", json!({})).await.unwrap();
    assert_eq!(text, "sneaky done");
    let log = log_of(&dir);
    assert_eq!(log[0], "plain sneaky", "{log:?}");
    assert!(log[1].starts_with("task sneaky t-1 "), "{log:?}");
    assert_eq!(log[2], "result t-1", "{log:?}");
    // Remembered: the second call went out as a task at once.
    assert!(log[3].starts_with("task sneaky t-2 "), "{log:?}");
    assert_eq!(log.len(), 5, "{log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_only_tool_buddy_cannot_serve_is_left_out_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let source = tasks_server(&dir, "tasks");
    let skills = McpSkill::all(Arc::clone(&source)).await.unwrap();
    assert!(skills.iter().any(|s| s.name() == "tasks__locked"));
    let error = source
        .call("locked", json!({}))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("cannot be used"), "{error}");
    assert!(error.contains("tasks are switched off here"), "{error}");
    assert!(
        source.take_tools_changed(),
        "the table is told to list again"
    );
    let skills = McpSkill::all(Arc::clone(&source)).await.unwrap();
    let names: Vec<&str> = skills.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["tasks__slow", "tasks__sneaky"]);
    let left_out = source.left_out();
    assert_eq!(left_out.len(), 1, "{left_out:?}");
    assert_eq!(left_out[0].0, "locked");
    assert!(
        left_out[0].1.contains("takes only task-augmented calls"),
        "{left_out:?}"
    );
    assert_eq!(log_of(&dir), ["task locked"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_only_tools_of_a_server_without_tasks_are_not_offered() {
    let dir = tempfile::tempdir().unwrap();
    let source = tasks_server(&dir, "no-tasks");
    let skills = McpSkill::all(Arc::clone(&source)).await.unwrap();
    let names: Vec<&str> = skills.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["tasks__sneaky"]);
    let mut left_out = source.left_out();
    left_out.sort();
    let tools: Vec<&str> = left_out.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(tools, ["locked", "slow"]);
    assert!(
        left_out[0].1.contains("declares no tasks for tools/call"),
        "{left_out:?}"
    );
}
