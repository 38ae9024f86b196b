//! MCP progress and sampling inside a whole turn: the engine's stream carries each
//! call's progress and task status as `tool_progress` events (coalesced, in order, the
//! last one before the call's result), and a server's sampling is drawn from the turn's
//! model calls, refused past them, and counted in the turn's stats.

use std::sync::Arc;

use buddy_core::{ChatEvent, Message, StopReason};
use buddy_engine::{Engine, LoopPolicy, TurnRequest};
use buddy_mcp::{McpServerConfig, McpSource, McpToolbox};
use buddy_scripted::{Scenario, ScriptedProvider};
use buddy_skills::SkillRegistry;
use serde_json::json;

/// The test server of `progress.rs`.
fn server(name: &str) -> McpServerConfig {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/servers/progress_server.py"
    );
    McpServerConfig::stdio(name, &["python3", script])
}

/// A model that calls `tools` one a round, then answers with the last result.
fn calling(tools: &[&str]) -> Arc<ScriptedProvider> {
    let mut rules: Vec<serde_json::Value> = tools
        .iter()
        .enumerate()
        .map(|(n, tool)| json!({"when": {"round": n + 1}, "reply": {"tool_calls": [{"name": tool}]}}))
        .collect();
    rules.push(json!({"when": {}, "reply": {"text": "Result: {last_result}"}}));
    let script = json!({"name": "calls", "prompt": "",
        "expect": {"stop_reason": "completed", "model_calls": tools.len() + 1, "tool_calls": tools.len()},
        "rules": rules});
    let scenario = Scenario::parse(&script.to_string(), "calls").unwrap();
    Arc::new(ScriptedProvider::new(Arc::new(scenario)))
}

async fn toolbox(source: Arc<McpSource>) -> McpToolbox {
    McpToolbox::start(
        Arc::new(SkillRegistry::new()),
        vec![source],
        Box::new(SkillRegistry::new),
    )
    .await
    .unwrap()
}

/// The id the turn gave its call to `name`.
fn call_id(events: &[ChatEvent], name: &str) -> String {
    events
        .iter()
        .find_map(|e| match e {
            ChatEvent::ToolCallStart { id, name: n, .. } if n == name => Some(id.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no call to {name}"))
}

/// Where in `events` the first event `is` holds is.
fn position(events: &[ChatEvent], is: impl Fn(&ChatEvent) -> bool) -> usize {
    events.iter().position(is).expect("the event")
}

/// A `tool_progress` event's place in the stream, progress, message and status.
type Seen = (usize, Option<f64>, Option<String>, Option<String>);

/// The `tool_progress` events of call `id`.
fn progress_of(events: &[ChatEvent], id: &str) -> Vec<Seen> {
    events
        .iter()
        .enumerate()
        .filter_map(|(at, e)| match e {
            ChatEvent::ToolProgress {
                id: of,
                progress,
                message,
                status,
                ..
            } if of == id => Some((at, *progress, message.clone(), status.clone())),
            _ => None,
        })
        .collect()
}

// Multi-threaded, as `buddy run` and `buddy serve` are (rmcp's notification tasks then
// run in any order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_task_status_are_stream_events_coalesced_with_the_last_before_the_result() {
    let source = McpSource::new(server("p"));
    let engine = Engine::new(
        calling(&["p__flood", "p__export"]),
        Arc::new(toolbox(source).await),
    );
    let (events, outcome) = engine.run_collect(TurnRequest::new("m", "go")).await;
    assert_eq!(outcome.reason, StopReason::Completed, "{outcome:?}");

    // The flood: 300 notifications in a few milliseconds come out as a few events (at
    // most one per 250 ms of the turn, plus the first and the last), in order, the
    // last one the server sent before the result.
    let flood = call_id(&events, "p__flood");
    let started = position(
        &events,
        |e| matches!(e, ChatEvent::ToolCallStart { id, .. } if *id == flood),
    );
    let ended = position(
        &events,
        |e| matches!(e, ChatEvent::ToolCallResult { id, .. } if *id == flood),
    );
    let seen = progress_of(&events, &flood);
    let elapsed_ms = outcome.stats.elapsed_ms;
    assert!(
        !seen.is_empty() && seen.len() as u64 <= 2 + elapsed_ms / 250,
        "{} events in {elapsed_ms} ms",
        seen.len()
    );
    assert!(seen.iter().all(|(at, ..)| (started..ended).contains(at)));
    let values: Vec<f64> = seen.iter().filter_map(|(_, p, ..)| *p).collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    let last = seen.last().unwrap();
    assert_eq!((last.1, last.2.as_deref()), (Some(300.0), Some("row 300")));

    // The task: its statuses in order, from the first (`queued`) to `completed`.
    let export = call_id(&events, "p__export");
    let ended = position(
        &events,
        |e| matches!(e, ChatEvent::ToolCallResult { id, .. } if *id == export),
    );
    let seen = progress_of(&events, &export);
    assert!(seen.iter().all(|(at, ..)| *at < ended));
    let order = [
        ("working", "queued"),
        ("working", "copying rows"),
        ("input_required", "waiting for an answer"),
        ("working", "writing"),
    ];
    let mut from = 0;
    for (_, _, message, status) in &seen[..seen.len() - 1] {
        let status = status.as_deref().unwrap_or_default();
        let message = message.as_deref().unwrap_or_default();
        let at = order[from..]
            .iter()
            .position(|step| *step == (status, message))
            .unwrap_or_else(|| panic!("{status} {message} out of order in {seen:?}"));
        from += at + 1;
    }
    assert_eq!(
        seen.first().map(|s| s.2.as_deref()),
        Some(Some("queued")),
        "the first status goes out at once"
    );
    assert_eq!(seen.last().and_then(|s| s.3.as_deref()), Some("completed"));

    // None of it is in the history the model reads.
    let history = serde_json::to_string(&outcome.messages).unwrap();
    assert!(!history.contains("row 300") && !history.contains("copying rows"));
    assert_eq!(outcome.stats.tool_calls, 2);
}

/// A model that answers every sampling request with `text`.
fn answering(text: &str) -> buddy_mcp::Sampler {
    let script = json!({"name": "sampler", "prompt": "",
        "expect": {"stop_reason": "completed", "model_calls": 1, "tool_calls": 0},
        "rules": [{"when": {}, "reply": {"text": text}}]});
    let scenario = Scenario::parse(&script.to_string(), "sampler").unwrap();
    buddy_mcp::Sampler {
        provider: Arc::new(ScriptedProvider::new(Arc::new(scenario))),
        model: "scripted:sampler".into(),
    }
}

#[tokio::test]
async fn sampling_is_drawn_from_the_turns_model_calls_and_refused_past_them() {
    let mut config = server("p");
    config.sampling = true;
    let source = McpSource::new(config);
    source.set_sampler(answering("a line"));
    let engine = Engine::new(
        calling(&["p__ask"]),
        Arc::new(toolbox(Arc::clone(&source)).await),
    );
    let mut request = TurnRequest::new("m", "go");
    request.policy = LoopPolicy {
        max_model_calls: 3,
        ..LoopPolicy::default()
    };
    let (events, outcome) = engine.run_collect(request).await;

    // Of 3 model calls, the turn's first call made one and its answer holds one: the
    // server's first request gets the third, the two after it are refused.
    let result = outcome
        .messages
        .iter()
        .find_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap();
    let lines: Vec<&str> = result.lines().collect();
    assert_eq!(lines.len(), 3, "{result}");
    assert_eq!(lines[0], "got: a line");
    for refused in &lines[1..] {
        assert!(
            refused.starts_with(
                "refused: buddy refused the sampling request: the turn's 3 model calls"
            ),
            "{result}"
        );
    }
    let sampled: Vec<Option<&String>> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::ToolSampling {
                refused, server, ..
            } => {
                assert_eq!(server, "p");
                Some(refused.as_ref())
            }
            _ => None,
        })
        .collect();
    assert_eq!(sampled.len(), 3, "one event a request: {events:?}");
    assert!(sampled[0].is_none() && sampled[1].is_some() && sampled[2].is_some());

    // The turn's stats count the sampling call: 3 model calls in all, never more.
    assert_eq!(outcome.stats.model_calls, 3, "{:?}", outcome.stats);
    assert_eq!(outcome.stats.tool_calls, 1);
    let done = events.last().unwrap();
    let ChatEvent::Done { stats, .. } = done else {
        panic!("{done:?}")
    };
    assert_eq!(stats.model_calls, 3);
    assert_eq!(source.sampling_use().requests, 1);
}
