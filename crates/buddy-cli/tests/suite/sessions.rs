//! A Claude Code session through `buddy serve` (issue 54, item 6): a client that names
//! its session and loops on one failing command is ended by buddy, and the session is
//! kept as one conversation that `buddy judge` (on its export) and `buddy replay` (on the
//! store) read like any other.

use buddy_server::ServerSettings;
use serde_json::{Value, json};

use super::buddy;
use super::server::{TestServer, all_scenarios, client, get_json};

/// codex's shell tool, as a Messages API client declares it.
fn exec_tool() -> Value {
    json!([{"name": "exec_command", "description": "Run a shell command",
            "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}},
                             "required": ["cmd"]}}])
}

/// Plays the client's side until buddy answers without a tool call; returns the round
/// trips and the last reply.
async fn loop_until_answered(url: &str) -> (usize, Value) {
    let mut history = vec![json!({"role": "user", "content": "Show the notes."})];
    for trip in 1..=20 {
        let body = json!({"model": "scripted:codex_repeat", "max_tokens": 200,
                          "tools": exec_tool(), "messages": history});
        let reply: Value = client()
            .post(format!("{url}/v1/messages"))
            .header("anthropic-version", "2023-06-01")
            .header("x-claude-code-session-id", "cc-3f2a9d")
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if reply["stop_reason"] != "tool_use" {
            return (trip, reply);
        }
        let content = reply["content"].as_array().unwrap().clone();
        let call = content.last().unwrap()["id"].clone();
        history.push(json!({"role": "assistant", "content": content}));
        history.push(json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": call, "is_error": true,
            "content": "cat: notes.txt: No such file or directory"}]}));
    }
    panic!("buddy never ended the client's loop");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claude_code_session_is_kept_judged_and_replayed() {
    let (dir, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let db = dir.path().join("sessions.db");
    let server = TestServer::start(&db, scenarios.path(), ServerSettings::default()).await;
    let (trips, reply) = loop_until_answered(&server.url).await;
    assert_eq!(reply["stop_reason"], "end_turn", "{reply}");
    assert!(trips <= 9, "{trips} round trips");

    let listed: Value = get_json(&format!("{}/v1/conversations", server.url)).await;
    let data = listed["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "the session is one conversation: {listed}");
    let id = data[0]["id"].as_str().unwrap().to_owned();
    let export: Value = get_json(&format!("{}/v1/conversations/{id}", server.url)).await;
    assert_eq!(export["turns"].as_array().unwrap().len(), trips);
    assert!(
        export["metadata"]["buddy_session"]
            .as_str()
            .unwrap()
            .starts_with("cc-3f2a9d#")
    );
    let file = dir.path().join("session.json");
    std::fs::write(&file, export.to_string()).unwrap();

    // `buddy judge` on the export sees the loop buddy ended.
    let judged = buddy(dir.path())
        .args(["judge", "session.json", "--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&judged.stdout);
    let runs: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "run")
        .collect();
    assert_eq!(runs.len(), 1, "{stdout}");
    assert_eq!(runs[0]["outcome"], "stopped", "{stdout}");

    // `buddy replay` reads the session's turns from the store like buddy's own.
    let replayed = buddy(dir.path())
        .args(["replay", &id, "--db", "sessions.db"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&replayed.stdout);
    assert!(
        replayed.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&replayed.stderr)
    );
    assert!(out.contains("turn_"), "{out}");
    server.stop().await;
}
