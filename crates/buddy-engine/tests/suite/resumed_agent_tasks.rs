//! Sub-agent trees survive a crash like single turns: the task a sub-agent's call
//! becomes is recorded with the calling turn's (under the agent call), and a turn that
//! finds that agent call left open by a crash waits on the task again; what it returns
//! is the agent call's result.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use buddy_core::{
    BoxFuture, Message, Provider, RecordedTask, RepeatSemantics, SkillContext, StopReason, TaskLog,
    ToolCall, ToolOutcome, ToolSpec, Toolbox,
};
use buddy_engine::{AgentSet, AgentSpec, Engine, TurnRequest};
use buddy_testkit::{ReplyProvider, assert_history_valid, reply_tokens};
use serde_json::json;

use super::call;

/// `export`: a call becomes task `t-<call id>` (recorded in its context's log) and is
/// answered; a task is waited on again by its id (`resume`), which it records.
#[derive(Default)]
struct Exports {
    resumed: Mutex<Vec<String>>,
}

fn specs() -> &'static [ToolSpec] {
    static SPECS: std::sync::OnceLock<Vec<ToolSpec>> = std::sync::OnceLock::new();
    SPECS.get_or_init(|| {
        vec![ToolSpec {
            name: "export".into(),
            description: "Exports.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }]
    })
}

impl Toolbox for Exports {
    fn specs(&self) -> &[ToolSpec] {
        specs()
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
            ToolOutcome::ok("exported")
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
            .push(format!("{}:{}:{}", call.name, call.id, task.task_id));
        let id = task.task_id.clone();
        Some(Box::pin(async move {
            ToolOutcome::ok(format!("exported ({id})"))
        }))
    }
}

/// What a turn's store would keep: each recorded task by call key.
#[derive(Debug, Default)]
struct Kept(Mutex<Vec<(String, String)>>);

impl TaskLog for Kept {
    fn created<'a>(&'a self, call_id: &'a str, task: &'a RecordedTask) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.0
                .lock()
                .unwrap()
                .push((call_id.to_owned(), task.task_id.clone()));
        })
    }
}

/// The caller delegates to `helper` (call a1), then answers; the helper (its
/// instructions say "child agent") exports (call c5), then reports.
fn model() -> ReplyProvider {
    ReplyProvider::new(|request, _| {
        let child = request.messages.iter().any(
            |m| matches!(m, Message::System { content, .. } if content.contains("child agent")),
        );
        let answered = request
            .messages
            .iter()
            .any(|m| matches!(m, Message::Tool { .. }));
        Ok(match (child, answered) {
            (true, false) => reply_tokens("", vec![call("c5", "export", json!({}))]),
            (true, true) => reply_tokens("Exported it.", vec![]),
            (false, false) => {
                reply_tokens("", vec![call("a1", "helper", json!({"task": "export it"}))])
            }
            (false, true) => reply_tokens("Done.", vec![]),
        })
    })
}

fn engine(tools: &Arc<Exports>) -> Engine {
    let provider: Arc<dyn Provider> = Arc::new(model());
    let helper = AgentSpec {
        name: "helper".into(),
        description: "Exports.".into(),
        instructions: "You are a child agent.".into(),
        skills: vec!["export".into()],
        ..AgentSpec::default()
    };
    let set = AgentSet::new(
        vec![helper],
        Arc::clone(tools) as Arc<dyn Toolbox>,
        Arc::clone(&provider),
        HashMap::new(),
    )
    .expect("agents");
    Engine::new(provider, set.toolbox())
}

#[tokio::test]
async fn a_sub_agents_task_is_recorded_under_its_callers_agent_call() {
    let tools = Arc::new(Exports::default());
    let kept = Arc::new(Kept::default());
    let request = TurnRequest::new("m", "go")
        .with_tasks(Some(Arc::clone(&kept) as Arc<dyn TaskLog>), HashMap::new());
    let (_, outcome) = engine(&tools).run_collect(request).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_eq!(
        *kept.0.lock().unwrap(),
        [("a1/export/c5".to_owned(), "t-c5".to_owned())]
    );
}

#[tokio::test]
async fn an_agent_call_a_crash_left_open_gets_what_its_sub_agents_task_returned() {
    let tools = Arc::new(Exports::default());
    let crashed = vec![
        Message::user("go"),
        Message::Assistant {
            content: None,
            tool_calls: vec![call("a1", "helper", json!({"task": "export it"}))],
        },
    ];
    let open: HashMap<String, RecordedTask> = [(
        "a1/export/c5".to_owned(),
        RecordedTask {
            server: "jobs".into(),
            task_id: "t-c5".into(),
        },
    )]
    .into();
    let request = TurnRequest::new("m", "and?")
        .with_history(crashed)
        .with_tasks(None, open);
    let (_, outcome) = engine(&tools).run_collect(request).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_history_valid(&outcome.messages);
    assert_eq!(*tools.resumed.lock().unwrap(), ["export:c5:t-c5"]);
    let result = outcome
        .messages
        .iter()
        .find_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } if tool_call_id == "a1" => Some((content.clone(), *is_error)),
            _ => None,
        })
        .expect("a result for the agent call");
    assert!(!result.1, "{result:?}");
    assert!(
        result.0.contains("`helper` was interrupted by a restart")
            && result.0.contains("`export`: exported (t-c5)"),
        "{}",
        result.0
    );
}
