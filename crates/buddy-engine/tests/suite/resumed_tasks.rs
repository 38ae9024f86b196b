//! A turn that finds calls a crash left open waits again on the tasks they became (the
//! toolbox's `resume`) instead of answering them as interrupted; a call that became no
//! task, or a toolbox that cannot resume, is answered as interrupted, and cancelling the
//! turn ends the wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use buddy_core::{
    BoxFuture, ChatEvent, Message, RecordedTask, RepeatSemantics, SkillContext, StopReason,
    ToolCall, ToolOutcome, ToolSpec, Toolbox,
};
use buddy_engine::{Engine, TurnRequest};
use buddy_testkit::{ReplyProvider, assert_history_valid, reply_tokens};
use serde_json::json;

use super::call;

/// `export`, whose tasks it resumes by id (`t-done` answers, `t-never` waits forever);
/// it records the resumes it was asked for.
struct Jobs {
    specs: Vec<ToolSpec>,
    resumed: Mutex<Vec<String>>,
}

impl Jobs {
    fn new() -> Arc<Self> {
        Arc::new(Jobs {
            specs: vec![ToolSpec {
                name: "export".to_owned(),
                description: "Exports.".to_owned(),
                parameters: json!({"type": "object", "properties": {}}),
            }],
            resumed: Mutex::default(),
        })
    }
}

impl Toolbox for Jobs {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }
    fn semantics(&self, _name: &str) -> Option<RepeatSemantics> {
        Some(RepeatSemantics::Observed)
    }
    fn invoke<'a>(&'a self, _call: &'a ToolCall, _ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async { ToolOutcome::error("not expected: the call was made before the crash") })
    }
    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        task: &'a RecordedTask,
        _ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        if let Ok(mut resumed) = self.resumed.lock() {
            resumed.push(format!("{}:{}", call.id, task.task_id));
        }
        let id = task.task_id.clone();
        Some(Box::pin(async move {
            if id == "t-never" {
                std::future::pending::<()>().await;
            }
            ToolOutcome::ok(format!("exported ({id})"))
        }))
    }
}

/// A conversation whose last round (two calls) a crash left open.
fn crashed() -> Vec<Message> {
    vec![
        Message::user("export both"),
        Message::Assistant {
            content: Some("Exporting.".to_owned()),
            tool_calls: vec![
                call("c1", "export", json!({})),
                call("c2", "export", json!({})),
            ],
        },
    ]
}

fn model() -> ReplyProvider {
    ReplyProvider::new(|_, _| Ok(reply_tokens("Done.", vec![])))
}

fn tool_results(history: &[Message]) -> Vec<(String, String, bool)> {
    history
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => Some((tool_call_id.clone(), content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

fn tasks(pairs: &[(&str, &str)]) -> HashMap<String, RecordedTask> {
    pairs
        .iter()
        .map(|(call, task)| {
            (
                (*call).to_owned(),
                RecordedTask {
                    server: "jobs".to_owned(),
                    task_id: (*task).to_owned(),
                },
            )
        })
        .collect()
}

#[tokio::test]
async fn a_call_with_a_recorded_task_gets_its_result_and_one_without_is_interrupted() {
    let jobs = Jobs::new();
    let engine = Engine::new(Arc::new(model()), Arc::clone(&jobs) as Arc<dyn Toolbox>);
    let request = TurnRequest::new("m", "and?")
        .with_history(crashed())
        .with_tasks(None, tasks(&[("c1", "t-done")]));
    let (events, outcome) = engine.run_collect(request).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_history_valid(&outcome.messages);
    let results = tool_results(&outcome.messages);
    assert_eq!(results[0], ("c1".into(), "exported (t-done)".into(), false));
    assert_eq!(results[1].0, "c2");
    assert!(
        results[1].2 && results[1].1.contains("interrupted"),
        "{results:?}"
    );
    assert_eq!(*jobs.resumed.lock().unwrap(), vec!["c1:t-done".to_owned()]);
    assert!(events.iter().any(
        |e| matches!(e, ChatEvent::ToolCallResult { id, content, .. }
        if id == "c1" && content == "exported (t-done)")
    ));
}

#[tokio::test]
async fn cancelling_the_turn_ends_the_wait_on_a_task() {
    let jobs = Jobs::new();
    let engine = Engine::new(Arc::new(model()), Arc::clone(&jobs) as Arc<dyn Toolbox>);
    let request = TurnRequest::new("m", "and?")
        .with_history(crashed())
        .with_tasks(None, tasks(&[("c1", "t-never"), ("c2", "t-done")]));
    let cancel = request.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let (_, outcome) = tokio::time::timeout(Duration::from_secs(30), engine.run_collect(request))
        .await
        .expect("the wait ends with the cancel");
    assert_eq!(outcome.reason, StopReason::Cancelled);
    assert_history_valid(&outcome.messages);
    let results = tool_results(&outcome.messages);
    assert!(
        results[0].2 && results[0].1.contains("interrupted"),
        "{results:?}"
    );
}

#[tokio::test]
async fn a_turn_that_resumed_a_task_replays_as_it_ran() {
    let jobs = Jobs::new();
    let engine = Engine::new(Arc::new(model()), Arc::clone(&jobs) as Arc<dyn Toolbox>);
    let request = TurnRequest::new("m", "and?")
        .with_history(crashed())
        .with_tasks(None, tasks(&[("c1", "t-done")]));
    let (_, outcome) = engine.run_collect(request).await;
    let recording = outcome.recording();
    assert_eq!(
        recording.tape.resumed.get("c1").map(|t| t.task_id.as_str()),
        Some("t-done")
    );
    let replayed = buddy_engine::replay(&recording, None)
        .await
        .expect("replays");
    assert!(replayed.same_stop, "{replayed:#?}");
    assert_eq!(replayed.beyond, None, "{replayed:#?}");
    assert_eq!(replayed.recorded, replayed.replayed, "{replayed:#?}");
    // The replay asked no tool: the one resume was the recorded run's.
    assert_eq!(*jobs.resumed.lock().unwrap(), vec!["c1:t-done".to_owned()]);
}
