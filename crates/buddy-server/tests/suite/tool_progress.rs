//! A running MCP call's progress and its task's status on `buddy serve`'s native stream:
//! `tool_progress` frames, coalesced, in order, the last before the call's result —
//! against the Python test server of buddy-mcp.

use std::sync::Arc;

use axum::http::StatusCode;
use buddy_core::{Message, ToolCall, Toolbox};
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_mcp::{McpServerConfig, McpSource, McpToolbox};
use buddy_server::{AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_skills::SkillRegistry;
use buddy_store::SqliteStore;
use buddy_testkit::{ReplyProvider, reply_tokens};
use serde_json::json;

use super::elicitations::Frames;
use super::post;
use super::reattach::{Frame, open};

/// A model that calls `p__flood`, then `p__export`, then answers with the results.
struct Calling {
    toolbox: Arc<dyn Toolbox>,
}

impl Backend for Calling {
    fn models(&self) -> Vec<String> {
        vec!["m".into()]
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        let provider = ReplyProvider::new(|request, _| {
            let results: Vec<&str> = request
                .messages
                .iter()
                .filter_map(|m| match m {
                    Message::Tool { content, .. } => Some(content.as_str()),
                    _ => None,
                })
                .collect();
            Ok(match results.len() {
                0 => reply_tokens("", vec![ToolCall::new("c1", "p__flood", "{}")]),
                1 => reply_tokens("", vec![ToolCall::new("c2", "p__export", "{}")]),
                _ => reply_tokens(&results.join("; "), vec![]),
            })
        });
        Ok(Resolved {
            provider: Arc::new(provider),
            toolbox: Arc::clone(&self.toolbox),
            model: "m".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

async fn state() -> AppState {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../buddy-mcp/tests/servers/progress_server.py"
    );
    let source = McpSource::new(McpServerConfig::stdio("p", &["python3", script]));
    let toolbox = McpToolbox::start(
        Arc::new(SkillRegistry::new()),
        vec![source],
        Box::new(SkillRegistry::new),
    )
    .await
    .unwrap();
    AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Calling {
            toolbox: Arc::new(toolbox),
        }),
        PolicyConfig::default(),
        ServerSettings::default(),
    )
}

/// Where the frame `is` holds is.
fn at(frames: &[Frame], is: impl Fn(&Frame) -> bool) -> usize {
    frames.iter().position(is).expect("the frame")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_native_stream_carries_coalesced_progress_and_task_status_before_each_result() {
    let state = state().await;
    let (status, body) = open(&state, post("/v1/chat", json!({"message": "go"}), None)).await;
    assert_eq!(status, StatusCode::OK);
    let mut stream = Frames::new(body);
    // The task asks the person a question on its way: declined from the API.
    let mut frames = stream.until(Some("elicitation_required")).await;
    let turn = frames[0].data["turn_id"].as_str().unwrap().to_owned();
    let asked = frames.last().unwrap().data["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = open(
        &state,
        post(
            &format!("/v1/turns/{turn}/elicitations/{asked}"),
            json!({"action": "decline"}),
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    frames.extend(stream.until(None).await);
    let done = frames.last().expect("frames");
    assert_eq!(done.name, "done", "{:?}", done.data);
    assert_eq!(done.data["answer"], "flooded; exported 48,213 rows");
    let progress = |call: &str| -> Vec<(usize, &serde_json::Value)> {
        frames
            .iter()
            .enumerate()
            .filter(|(_, f)| f.name == "tool_progress" && f.data["id"] == call)
            .map(|(n, f)| (n, &f.data))
            .collect()
    };

    // The flood's 300 notifications: a few frames (one per 250 ms of the turn at most,
    // and the first and last), in order, ending with the last, before the result.
    let flood = progress("c1");
    let elapsed_ms = done.data["stats"]["elapsed_ms"].as_u64().unwrap();
    assert!(
        !flood.is_empty() && flood.len() as u64 <= 2 + elapsed_ms / 250,
        "{} frames in {elapsed_ms} ms",
        flood.len()
    );
    let values: Vec<f64> = flood
        .iter()
        .filter_map(|(_, d)| d["progress"].as_f64())
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    let (last_at, last) = flood.last().unwrap();
    assert_eq!(
        (
            last["progress"].clone(),
            last["total"].clone(),
            last["message"].clone()
        ),
        (json!(300.0), json!(300.0), json!("row 300"))
    );
    assert_eq!(last["name"], "p__flood");
    let result = at(&frames, |f| {
        f.name == "tool_call_result" && f.data["id"] == "c1"
    });
    assert!(*last_at < result);

    // The task: its first status at once, `completed` last, before its result.
    let export = progress("c2");
    let first = export.first().expect("a status").1;
    assert_eq!(
        (first["status"].clone(), first["message"].clone()),
        (json!("working"), json!("queued"))
    );
    let (last_at, last) = export.last().unwrap();
    assert_eq!(last["status"], "completed");
    let result = at(&frames, |f| {
        f.name == "tool_call_result" && f.data["id"] == "c2"
    });
    assert!(*last_at < result);
}
