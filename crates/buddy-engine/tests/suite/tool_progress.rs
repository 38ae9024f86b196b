//! A running call's progress through its context: `tool_progress` events on the turn's
//! stream, per call, at most 4 a second, the last before the call's result, and nothing
//! of it in the history.

use std::time::Duration;

use buddy_core::{
    BoxFuture, ChatEvent, Message, Progress, RepeatSemantics, SkillContext, StopReason, ToolCall,
    ToolOutcome, ToolSpec, Toolbox,
};
use buddy_engine::LoopPolicy;
use buddy_testkit::{ReplyProvider, reply_tokens};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{call, run_turn};

/// `export`, which reports 1000 steps 2 ms apart (2 s), then its task `completed`.
struct Exporting {
    specs: Vec<ToolSpec>,
}

impl Toolbox for Exporting {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }
    fn semantics(&self, _: &str) -> Option<RepeatSemantics> {
        Some(RepeatSemantics::Effectful)
    }
    fn invoke<'a>(&'a self, call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let Some(progress) = ctx.progress else {
                return ToolOutcome::error("no progress sink in the context");
            };
            for n in 1..=1000u32 {
                progress.report(Progress {
                    progress: Some(f64::from(n)),
                    total: Some(1000.0),
                    message: Some(format!("row {n}")),
                    status: None,
                });
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            progress.report(Progress {
                status: Some("completed".into()),
                ..Progress::default()
            });
            ToolOutcome::ok(format!("{} exported 1000 rows", call.id))
        })
    }
}

/// Two exports at once, then the answer.
fn model() -> ReplyProvider {
    ReplyProvider::new(|req, _| {
        let done = req
            .messages
            .iter()
            .any(|m| matches!(m, Message::Tool { .. }));
        Ok(match done {
            true => reply_tokens("Both exported.", vec![]),
            false => reply_tokens(
                "",
                vec![
                    call("a", "export", json!({"table": "a"})),
                    call("b", "export", json!({"table": "b"})),
                ],
            ),
        })
    })
}

/// Places in the stream of call `id`'s start, result and progress events (with their
/// progress, message and status).
#[allow(clippy::type_complexity)]
fn of_call(
    events: &[ChatEvent],
    id: &str,
) -> (
    usize,
    usize,
    Vec<(usize, Option<f64>, Option<String>, Option<String>)>,
) {
    let mut start = None;
    let mut result = None;
    let mut progress = Vec::new();
    for (at, event) in events.iter().enumerate() {
        match event {
            ChatEvent::ToolCallStart { id: of, .. } if of == id => start = Some(at),
            ChatEvent::ToolCallResult { id: of, .. } if of == id => result = Some(at),
            ChatEvent::ToolProgress {
                id: of,
                progress: p,
                message,
                status,
                ..
            } if of == id => progress.push((at, *p, message.clone(), status.clone())),
            _ => {}
        }
    }
    (start.expect("a start"), result.expect("a result"), progress)
}

#[tokio::test(start_paused = true)]
async fn each_calls_progress_is_coalesced_to_four_a_second_with_its_last_before_its_result() {
    let toolbox = Exporting {
        specs: vec![ToolSpec {
            name: "export".into(),
            description: "Exports a table.".into(),
            parameters: json!({"type": "object", "properties": {"table": {"type": "string"}}}),
        }],
    };
    let policy = LoopPolicy {
        max_parallel_tools: 2,
        ..LoopPolicy::default()
    };
    let (events, outcome) = run_turn(model(), toolbox, policy).await;
    assert_eq!(outcome.reason, StopReason::Completed, "{outcome:?}");
    for id in ["a", "b"] {
        let (start, result, progress) = of_call(&events, id);
        // 2 s of updates: the first at once, then one per 250 ms, then the last.
        assert!(
            (8..=10).contains(&progress.len()),
            "{id}: {} events: {progress:?}",
            progress.len()
        );
        assert!(progress.iter().all(|(at, ..)| start < *at && *at < result));
        let values: Vec<f64> = progress.iter().filter_map(|(_, p, ..)| *p).collect();
        assert!(values.windows(2).all(|w| w[0] < w[1]), "{id}: {values:?}");
        assert_eq!(values[0], 1.0);
        let last = progress.last().unwrap();
        assert_eq!(
            (last.1, last.2.as_deref(), last.3.as_deref()),
            (Some(1000.0), None, Some("completed")),
            "{id}: the last state, the status's (empty) message replacing the rows'"
        );
    }
    // The model reads the results, never the progress.
    let history = serde_json::to_string(&outcome.messages).unwrap();
    assert!(!history.contains("row 1000") && !history.contains("completed"));
    assert_eq!(
        (outcome.stats.model_calls, outcome.stats.tool_calls),
        (2, 2)
    );
}
