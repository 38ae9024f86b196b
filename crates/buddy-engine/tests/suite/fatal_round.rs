//! A call that fails fatally cancels the calls still running beside it in its round: a
//! sub-agent ends at once with its work so far (kept in its result), another call with
//! an error result saying why; the turn ends `skill_failed` without waiting for them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use buddy_core::{
    BoxFuture, Message, Provider, RepeatSemantics, SkillContext, StopReason, ToolCall, ToolOutcome,
    ToolSpec, Toolbox,
};
use buddy_engine::{AgentOutcome, AgentSet, AgentSpec, AgentStatus, Engine, TurnRequest};
use buddy_testkit::{ReplyProvider, assert_history_valid, reply_tokens};
use serde_json::json;

use super::call;

/// `explode` fails fatally after 300 ms; `slow` answers after 30 s; `read` returns the
/// page it is asked for after 20 ms.
struct Tools {
    specs: Vec<ToolSpec>,
}

impl Tools {
    fn new() -> Self {
        let spec = |name: &str| ToolSpec {
            name: name.into(),
            description: format!("The {name} tool."),
            parameters: json!({"type": "object", "properties": {"page": {"type": "integer"}}}),
        };
        Tools {
            specs: vec![spec("explode"), spec("slow"), spec("read")],
        }
    }
}

impl Toolbox for Tools {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }
    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        self.specs
            .iter()
            .any(|s| s.name == name)
            .then_some(RepeatSemantics::Effectful)
    }
    fn invoke<'a>(&'a self, call: &'a ToolCall, _: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            match call.name.as_str() {
                "explode" => {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    ToolOutcome {
                        content: "the disk is gone".into(),
                        is_error: true,
                        fatal: true,
                    }
                }
                "slow" => {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    ToolOutcome::ok("slow done")
                }
                _ => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    ToolOutcome::ok(format!("page {}", call.arguments))
                }
            }
        })
    }
}

/// The caller asks `reader` for a report, `explode` and `slow` in one round; the reader
/// (its instructions say "child agent") reads page after page, saying so each time.
fn model() -> ReplyProvider {
    ReplyProvider::new(|request, _| {
        let child = request.messages.iter().any(
            |m| matches!(m, Message::System { content, .. } if content.contains("child agent")),
        );
        if child {
            let round = request
                .messages
                .iter()
                .filter(|m| matches!(m, Message::Tool { .. }))
                .count()
                + 1;
            let page = call(&format!("r{round}"), "read", json!({"page": round}));
            return Ok(reply_tokens(&format!("Reading page {round}. "), vec![page]));
        }
        let answered = request
            .messages
            .iter()
            .any(|m| matches!(m, Message::Tool { .. }));
        Ok(match answered {
            true => reply_tokens("Done.", vec![]),
            false => reply_tokens(
                "",
                vec![
                    call("a1", "reader", json!({"task": "read every page"})),
                    call("e1", "explode", json!({})),
                    call("s1", "slow", json!({})),
                ],
            ),
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_call_cancels_its_running_siblings_and_their_work_so_far_is_kept() {
    let provider: Arc<dyn Provider> = Arc::new(model());
    let reader = AgentSpec {
        name: "reader".into(),
        description: "Reads pages and reports.".into(),
        instructions: "You are a child agent.".into(),
        skills: vec!["read".into()],
        ..AgentSpec::default()
    };
    let set = AgentSet::new(
        vec![reader],
        Arc::new(Tools::new()),
        Arc::clone(&provider),
        HashMap::new(),
    )
    .expect("agents");
    let engine = Engine::new(provider, set.toolbox());
    let started = Instant::now();
    let (_, outcome) = tokio::time::timeout(
        Duration::from_secs(20),
        engine.run_collect(TurnRequest::new("m", "go")),
    )
    .await
    .expect("the turn ends without waiting for its slow calls");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(outcome.reason, StopReason::SkillFailed, "{outcome:?}");
    assert!(
        outcome
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("the disk is gone"),
        "{:?}",
        outcome.error
    );
    assert_history_valid(&outcome.messages);
    let result = |id: &str| {
        outcome
            .messages
            .iter()
            .find_map(|m| match m {
                Message::Tool {
                    tool_call_id,
                    content,
                    ..
                } if tool_call_id == id => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no result for {id}"))
    };
    // The reader was cancelled mid-work: what it had read is in its result.
    let reader: AgentOutcome = serde_json::from_str(&result("a1")).expect("an agent outcome");
    assert_eq!(
        (reader.status, reader.partial),
        (AgentStatus::Cancelled, true)
    );
    assert!(
        reader.answer.contains("its work so far: page"),
        "{}",
        reader.answer
    );
    assert!(reader.model_calls >= 1, "{reader:?}");
    assert!(result("s1").contains("another call of this round failed fatally"));
}
