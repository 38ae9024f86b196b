//! The client side of the protocol beyond tools: resources, prompts, roots, structured
//! output, progress and cancellation — against server-everything and a small Python
//! server that records what buddy sends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use buddy_core::{Skill, SkillContext};
use buddy_mcp::{McpServerConfig, McpSkill, McpSource, file_uri};
use serde_json::json;

use super::npm_server;

fn everything(name: &str) -> McpServerConfig {
    McpServerConfig::stdio(name, &[&npm_server("mcp-server-everything"), "stdio"])
}

/// Waits (bounded) until `ready` holds, naming `what` when it never does.
async fn eventually(what: &str, mut ready: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !ready().await {
        assert!(started.elapsed() < Duration::from_secs(20), "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn resources_are_listed_read_and_offered_to_the_model_as_one_skill() {
    let source = McpSource::new(everything("e"));
    let skills = McpSkill::all(Arc::clone(&source)).await.unwrap();
    let resources = source.list_resources().await.unwrap();
    let doc = resources
        .iter()
        .find(|r| r.uri == "demo://resource/static/document/architecture.md")
        .unwrap_or_else(|| panic!("{resources:?}"));
    let text = source.read_resource(&doc.uri).await.unwrap();
    assert!(text.len() > 100, "{text}");

    // The model gets `e__read_resource`, its description naming the resources.
    let skill = skills
        .iter()
        .find(|s| s.name() == "e__read_resource")
        .unwrap_or_else(|| panic!("{:?}", skills.iter().map(|s| s.name()).collect::<Vec<_>>()));
    assert!(
        skill.description().contains(&doc.uri),
        "{}",
        skill.description()
    );
    let read = skill
        .execute(json!({"uri": doc.uri}), SkillContext::default())
        .await
        .unwrap();
    assert_eq!(read, text);
    // A URI the server does not have is an error the model reads.
    let missing = skill
        .execute(
            json!({"uri": "demo://nothing/here"}),
            SkillContext::default(),
        )
        .await
        .unwrap_err();
    assert!(missing.to_string().contains("MCP server `e`"), "{missing}");
}

#[tokio::test]
async fn prompts_are_listed_and_filled_in() {
    let source = McpSource::new(everything("e"));
    source.start().await.unwrap();
    let prompts = source.list_prompts().await.unwrap();
    let args_prompt = prompts
        .iter()
        .find(|p| p.name == "args-prompt")
        .unwrap_or_else(|| panic!("{prompts:?}"));
    let city = args_prompt
        .arguments
        .iter()
        .find(|a| a.name == "city")
        .unwrap();
    assert!(city.required);
    let mut arguments = serde_json::Map::new();
    arguments.insert("city".into(), json!("Lyon"));
    let messages = source.get_prompt("args-prompt", arguments).await.unwrap();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].0, "user");
    assert!(messages[0].1.contains("Lyon"), "{messages:?}");
}

#[tokio::test]
async fn a_tools_output_schema_is_told_to_the_model_and_its_structured_content_passed() {
    let source = McpSource::new(everything("e"));
    let skills = McpSkill::all(Arc::clone(&source)).await.unwrap();
    let skill = skills
        .iter()
        .find(|s| s.name() == "e__get-structured-content")
        .unwrap();
    assert!(
        skill
            .description()
            .contains("Its result is JSON matching this schema: {"),
        "{}",
        skill.description()
    );
    let result = skill
        .execute(json!({"location": "Chicago"}), SkillContext::default())
        .await
        .unwrap();
    let structured = result
        .lines()
        .find_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .unwrap_or_else(|| panic!("no JSON line in {result}"));
    assert!(structured.get("temperature").is_some(), "{structured}");
    // It keeps its own schema: no note about a mismatch.
    assert!(!result.contains("output schema"), "{result}");
}

#[tokio::test]
async fn progress_notifications_are_received_during_a_call() {
    let source = McpSource::new(everything("e"));
    source.start().await.unwrap();
    // server-everything registers this tool once initialized.
    eventually("the long-running tool is listed", async || {
        source.take_tools_changed();
        source
            .start()
            .await
            .unwrap()
            .iter()
            .any(|t| t.name == "trigger-long-running-operation")
    })
    .await;
    let text = source
        .call(
            "trigger-long-running-operation",
            json!({"duration": 1, "steps": 4}),
        )
        .await
        .unwrap();
    assert!(text.contains("Steps: 4"), "{text}");
    let (seen, last) = source.progress_seen();
    assert_eq!(seen, 4, "one notification a step");
    assert_eq!(last.as_deref(), Some("4/4"), "{last:?}");
}

#[tokio::test]
async fn the_sandbox_is_offered_as_the_servers_roots() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = everything("e");
    config.sandbox = Some(dir.path().to_path_buf());
    let source = McpSource::new(config);
    source.start().await.unwrap();
    // server-everything asks for the roots when the client offers them, then lists a
    // tool that shows them.
    eventually("get-roots-list is listed", async || {
        source.take_tools_changed();
        source
            .start()
            .await
            .unwrap()
            .iter()
            .any(|t| t.name == "get-roots-list")
    })
    .await;
    let text = source.call("get-roots-list", json!({})).await.unwrap();
    assert!(text.contains(&file_uri(dir.path())), "{text}");
}

/// The messages a recording test server wrote to `log`, one JSON value a line.
fn logged(log: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A stdio server (2026-07-28 discovery refused, so the handshake) whose `hang` never
/// answers; every message it gets is appended to the file argv[1].
const RECORDER: &str = r#"
import json, sys
log = open(sys.argv[1], "a")
for line in sys.stdin:
    log.write(line); log.flush()
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    def send(obj):
        sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
    if mid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "recorder", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{"name": "hang", "inputSchema": {"type": "object"}}]}})
    elif method != "tools/call":
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
"#;

#[tokio::test]
async fn a_call_given_up_sends_notifications_cancelled_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("messages.jsonl");
    let log_arg = log.display().to_string();
    let source = McpSource::new(McpServerConfig::stdio(
        "rec",
        &["python3", "-c", RECORDER, &log_arg],
    ));
    source.start().await.unwrap();
    // The turn is cancelled while the call runs: its future is dropped.
    let given_up =
        tokio::time::timeout(Duration::from_millis(300), source.call("hang", json!({}))).await;
    assert!(given_up.is_err(), "the call never answers");
    let messages = || logged(&log);
    eventually("notifications/cancelled arrives", async || {
        messages()
            .iter()
            .any(|m| m["method"] == "notifications/cancelled")
    })
    .await;
    let all = messages();
    let call_id = all
        .iter()
        .find(|m| m["method"] == "tools/call")
        .map(|m| m["id"].clone())
        .unwrap();
    let cancelled = all
        .iter()
        .find(|m| m["method"] == "notifications/cancelled")
        .unwrap();
    assert_eq!(cancelled["params"]["requestId"], call_id, "{cancelled}");
    // It asked `server/discover` first and, refused, shook hands the old way.
    assert_eq!(all[0]["method"], "server/discover");
    assert_eq!(all[1]["method"], "initialize");
    assert_eq!(all[1]["params"]["clientInfo"]["name"], "buddy");
}

#[tokio::test]
async fn a_call_past_its_timeout_is_cancelled_before_the_server_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("messages.jsonl");
    let log_arg = log.display().to_string();
    let mut config = McpServerConfig::stdio("rec", &["python3", "-c", RECORDER, &log_arg]);
    config.call_timeout_secs = 0.5;
    let source = McpSource::new(config);
    source.start().await.unwrap();
    let err = source.call("hang", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("did not answer `hang`"), "{err}");
    // buddy wrote the notification before the call returned; the server reads its
    // input to the end once its stdin is closed.
    eventually("notifications/cancelled arrives", async || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("notifications/cancelled")
    })
    .await;
}

/// A model that answers every call with `text`.
fn answering(text: &str) -> buddy_mcp::Sampler {
    let script = json!({"name": "sampler", "prompt": "",
        "expect": {"stop_reason": "completed", "model_calls": 1, "tool_calls": 0},
        "rules": [{"when": {}, "reply": {"text": text}}]});
    let scenario = buddy_scripted::Scenario::parse(&script.to_string(), "sampler").unwrap();
    buddy_mcp::Sampler {
        provider: Arc::new(buddy_scripted::ScriptedProvider::new(Arc::new(scenario))),
        model: "scripted:sampler".into(),
    }
}

/// The tools server-everything lists once `wanted` is among them (it adds some after
/// start), or after 20 s.
async fn settled_tools(source: &McpSource, wanted: &str) -> Vec<String> {
    let mut names = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        source.take_tools_changed();
        names = source
            .start()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        if names.iter().any(|n| n == wanted) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    names
}

#[tokio::test]
async fn sampling_is_answered_by_buddys_model_only_when_the_operator_allows_it() {
    let mut config = everything("e");
    config.sampling = true;
    let source = McpSource::new(config);
    source.set_sampler(answering("Rain on the harbour."));
    source.start().await.unwrap();
    let tools = settled_tools(&source, "trigger-sampling-request").await;
    assert!(
        tools.iter().any(|t| t == "trigger-sampling-request"),
        "{tools:?}"
    );
    let text = source
        .call(
            "trigger-sampling-request",
            json!({"prompt": "A haiku about rain", "maxTokens": 50}),
        )
        .await
        .unwrap();
    assert!(text.contains("Rain on the harbour."), "{text}");
    assert_eq!(source.sampling_use().requests, 1);

    // Without `sampling = true` the sampler is not taken: buddy does not offer sampling.
    let source = McpSource::new(everything("e"));
    source.set_sampler(answering("never"));
    source.start().await.unwrap();
    // It has settled once it lists the tools it adds after start.
    let tools = settled_tools(&source, "simulate-research-query").await;
    assert!(
        tools.iter().any(|t| t == "simulate-research-query"),
        "{tools:?}"
    );
    assert!(
        !tools.iter().any(|t| t == "trigger-sampling-request"),
        "{tools:?}"
    );
    assert_eq!(source.sampling_use().requests, 0);
}

/// A stdio server with two tools: `fine`, and `remote` whose schema has a `$ref` to a
/// network URI (a canary on a closed loopback port).
const REMOTE_REF: &str = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    def send(obj):
        sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
    if mid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "refs", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "fine", "inputSchema": {"type": "object"}},
            {"name": "remote", "inputSchema": {"type": "object", "properties": {
                "profile": {"$ref": "http://127.0.0.1:9/profile.json"}}}}]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
"#;

#[tokio::test]
async fn a_tool_whose_schema_needs_a_network_ref_is_left_out_and_the_rest_come_in() {
    let source = McpSource::new(McpServerConfig::stdio(
        "refs",
        &["python3", "-c", REMOTE_REF],
    ));
    let skills = McpSkill::all(Arc::clone(&source)).await.unwrap();
    let names: Vec<&str> = skills.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["refs__fine"]);
    let left_out = source.left_out();
    assert_eq!(left_out.len(), 1, "{left_out:?}");
    assert_eq!(left_out[0].0, "remote");
    assert!(left_out[0].1.contains("input schema"), "{left_out:?}");
}

/// A stdio server whose `export` the server runs as a task (SEP-2663): `tasks/get`
/// reports `working` three times, then `completed` with the tool's result; `stuck` never
/// finishes. Every message it gets is appended to the file argv[1].
const TASKS: &str = r#"
import json, sys
log = open(sys.argv[1], "a")
polls = {}
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n"); sys.stdout.flush()
def task(tid, status, **more):
    t = {"taskId": tid, "status": status, "createdAt": "2026-11-27T12:00:00Z",
         "lastUpdatedAt": "2026-11-27T12:00:00Z", "ttlMs": None, "pollIntervalMs": 20}
    t.update(more)
    return t
for line in sys.stdin:
    log.write(line); log.flush()
    msg = json.loads(line)
    method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if mid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
              "serverInfo": {"name": "tasks", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "export", "inputSchema": {"type": "object"}},
            {"name": "stuck", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call":
        tid = "t-" + params["name"]
        polls[tid] = 0
        send({"jsonrpc": "2.0", "id": mid, "result": dict(task(tid, "working"), resultType="task")})
    elif method == "tasks/get":
        tid = params["taskId"]
        polls[tid] += 1
        if tid == "t-export" and polls[tid] > 3:
            body = task(tid, "completed", result={"content": [{"type": "text", "text": "exported 48,213 rows"}]})
        else:
            body = task(tid, "working")
        send({"jsonrpc": "2.0", "id": mid, "result": dict(body, resultType="complete")})
    elif method == "tasks/cancel":
        send({"jsonrpc": "2.0", "id": mid, "result": {"resultType": "complete"}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
"#;

#[tokio::test]
async fn a_call_the_server_runs_as_a_task_is_polled_to_its_result_and_cancelled_when_given_up() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("messages.jsonl");
    let log_arg = log.display().to_string();
    let source = McpSource::new(McpServerConfig::stdio(
        "jobs",
        &["python3", "-c", TASKS, &log_arg],
    ));
    source.start().await.unwrap();
    let text = source.call("export", json!({})).await.unwrap();
    assert_eq!(text, "exported 48,213 rows");
    let messages = || logged(&log);
    let polls = messages()
        .iter()
        .filter(|m| m["method"] == "tasks/get" && m["params"]["taskId"] == "t-export")
        .count();
    assert_eq!(polls, 4, "polled until completed");
    // buddy told the server it takes tasks.
    let hello = messages()
        .into_iter()
        .find(|m| m["method"] == "initialize")
        .unwrap();
    assert!(
        hello["params"]["capabilities"]["extensions"]
            .get("io.modelcontextprotocol/tasks")
            .is_some(),
        "{hello}"
    );
    // A turn that gives up the call (its future dropped) cancels the task.
    let given_up =
        tokio::time::timeout(Duration::from_millis(300), source.call("stuck", json!({}))).await;
    assert!(given_up.is_err(), "the task never finishes");
    eventually("tasks/cancel arrives", async || {
        messages()
            .iter()
            .any(|m| m["method"] == "tasks/cancel" && m["params"]["taskId"] == "t-stuck")
    })
    .await;
}

#[tokio::test]
async fn a_task_past_task_timeout_secs_is_cancelled_and_an_error_result() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("messages.jsonl");
    let log_arg = log.display().to_string();
    let mut config = McpServerConfig::stdio("jobs", &["python3", "-c", TASKS, &log_arg]);
    config.task_timeout_secs = 0.2;
    let source = McpSource::new(config);
    source.start().await.unwrap();
    let error = source.call("stuck", json!({})).await.unwrap_err();
    assert!(error.to_string().contains("task_timeout_secs"), "{error}");
    eventually("tasks/cancel arrives", async || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("tasks/cancel")
    })
    .await;
}
