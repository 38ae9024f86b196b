//! Task-only MCP tools (2025-11-25 `taskSupport: "required"`): server-everything's
//! `simulate-research-query` is offered and a `buddy run` turn gets its report; a
//! server's task-only tools it cannot serve (it declares no tasks) are named in
//! `buddy mcp list` with the reason.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

fn buddy(dir: &Path, args: &[&str]) -> Output {
    super::buddy(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn everything() -> String {
    let modules = std::env::var_os("BUDDY_MCP_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../clients/mcp/node_modules"
            ))
        });
    let server = modules.join(".bin/mcp-server-everything");
    assert!(
        server.exists(),
        "{} is missing: run scripts/mcp-servers.sh",
        server.display()
    );
    server.display().to_string()
}

#[test]
fn a_task_only_tool_of_server_everything_runs_in_a_turn() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "[[mcp]]\nname = \"e\"\ncommand = [{:?}, \"stdio\"]\n",
        everything()
    );
    std::fs::write(dir.path().join("buddy.toml"), toml).unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("e__simulate-research-query"))
        .unwrap_or_else(|| panic!("not offered: {stdout}"));
    assert!(line.ends_with(", runs as a task"), "{line}");
    let scenario = serde_json::json!({
        "name": "research", "prompt": "research tides",
        "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
        "rules": [
            {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "e__simulate-research-query", "arguments": {"topic": "tides"}}]}},
            {"when": {}, "reply": {"text": "Found: {last_result}"}}]
    });
    std::fs::write(dir.path().join("research.json"), scenario.to_string()).unwrap();
    let out = buddy(dir.path(), &["run", "--scenario", "research.json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("# Research Report: tides"),
        "{stdout}{stderr}"
    );
}

#[test]
fn mcp_list_names_task_only_tools_buddy_cannot_serve_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let script = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../buddy-mcp/tests/servers/tasks_2025_server.py"
    ));
    let log = dir.path().join("asked.log");
    let toml = format!(
        "[[mcp]]\nname = \"t\"\ncommand = [\"python3\", {:?}, {:?}, \"no-tasks\"]\n",
        script.display().to_string(),
        log.display().to_string()
    );
    std::fs::write(dir.path().join("buddy.toml"), toml).unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("1 tool(s)"), "{stdout}");
    for tool in ["slow", "locked"] {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(tool))
            .unwrap_or_else(|| panic!("{tool} is not named: {stdout}"));
        assert!(
            line.contains("left out: it takes only task-augmented calls")
                && line.contains("declares no tasks for tools/call"),
            "{line}"
        );
    }
    assert!(stdout.contains("t__sneaky"), "{stdout}");
}
