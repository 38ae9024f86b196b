//! A tolerant start in `buddy run`: an imported server that cannot start (Docker not
//! running, say) is named on stderr and the turn runs with the others; a required one
//! stops buddy with its reason. And roots: server-filesystem keeps the directory it was
//! configured with through a whole turn.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

fn installed(env: &str, default: &str) -> PathBuf {
    let path = std::env::var_os(env).map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(default)
    });
    assert!(
        path.exists(),
        "{} is missing: run scripts/mcp-servers.sh, or set {env}",
        path.display()
    );
    path
}

fn time_server() -> String {
    installed("BUDDY_MCP_TIME", "target/mcp-venv/bin/mcp-server-time")
        .display()
        .to_string()
}

fn filesystem_server() -> String {
    installed("BUDDY_MCP_NODE_MODULES", "clients/mcp/node_modules")
        .join(".bin/mcp-server-filesystem")
        .display()
        .to_string()
}

fn buddy(dir: &Path, args: &[&str]) -> Output {
    super::buddy(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

const CLOCK: &str = r#"{"name": "clock", "prompt": "time?", "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
  "rules": [
    {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}]}},
    {"when": {}, "reply": {"text": "Now: {last_result}"}}]}"#;

#[test]
fn an_imported_server_that_cannot_start_does_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let claude = serde_json::json!({"mcpServers": {
        "time": {"command": time_server()},
        "github": {"command": "sh", "args": ["-c", "echo 'Cannot connect to the Docker daemon' >&2; exit 125"]},
        "gone": {"command": "/no/such/docker"},
    }});
    std::fs::write(dir.path().join("claude.json"), claude.to_string()).unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        "mcp_import = [\"claude.json\"]\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("clock.json"), CLOCK).unwrap();
    let out = buddy(dir.path(), &["run", "--scenario", "clock.json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with("Now: "), "{stdout}");
    let named = |server: &str, why: &str| {
        stderr.lines().any(|l| {
            l.contains(&format!("MCP server `{server}` is not running")) && l.contains(why)
        })
    };
    assert!(
        named("github", "Cannot connect to the Docker daemon"),
        "{stderr}"
    );
    assert!(named("gone", "/no/such/docker"), "{stderr}");
    // `buddy doctor` names them too, and they do not make it fail.
    let out = buddy(dir.path(), &["doctor"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    for server in ["github", "gone"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("mcp       {server}:")))
            .unwrap_or_else(|| panic!("no {server}: {stdout}"));
        assert!(
            line.contains(": ! ") && line.contains("not required"),
            "{line}"
        );
    }
    assert!(stdout.contains("mcp       time: ok"), "{stdout}");

    // In buddy.toml a server is required unless it says otherwise: buddy stops, naming it.
    let toml = format!(
        "[[mcp]]\nname = \"time\"\ncommand = [{:?}]\n\n[[mcp]]\nname = \"gone\"\ncommand = [\"/no/such/docker\"]\n",
        time_server()
    );
    std::fs::write(dir.path().join("buddy.toml"), &toml).unwrap();
    let out = buddy(dir.path(), &["run", "--scenario", "clock.json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("MCP server `gone`"), "{stderr}");
    // `required = false` lets it start without.
    std::fs::write(
        dir.path().join("buddy.toml"),
        format!("{toml}required = false\n"),
    )
    .unwrap();
    let out = buddy(dir.path(), &["run", "--scenario", "clock.json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("MCP server `gone` is not running"),
        "{stderr}"
    );
}

/// The README's example: server-filesystem started with a notes directory (not the
/// sandbox). buddy offers it that directory as its root, so the directory it was given
/// stays allowed through a whole turn that lists the allowed directories and reads a note.
#[test]
fn the_filesystem_server_keeps_its_configured_directory_through_a_turn() {
    let dir = tempfile::tempdir().unwrap();
    let notes = tempfile::tempdir().unwrap();
    let notes_dir = notes.path().canonicalize().unwrap();
    std::fs::write(notes_dir.join("todo.md"), "buy oat milk").unwrap();
    let toml = format!(
        "[[mcp]]\nname = \"fs\"\ncommand = [{:?}, {:?}]\n",
        filesystem_server(),
        notes_dir.display().to_string()
    );
    std::fs::write(dir.path().join("buddy.toml"), toml).unwrap();
    let note = notes_dir.join("todo.md").display().to_string();
    let scenario = serde_json::json!({
        "name": "notes", "prompt": "what is in my notes?",
        "expect": {"stop_reason": "completed", "model_calls": 3, "tool_calls": 2},
        "rules": [
            {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "fs__list_allowed_directories", "arguments": {}}]}},
            {"when": {"round": 2}, "reply": {"tool_calls": [{"name": "fs__read_text_file", "arguments": {"path": note}}]}},
            {"when": {}, "reply": {"text": "Notes: {last_result}"}}]
    });
    std::fs::write(dir.path().join("notes.json"), scenario.to_string()).unwrap();
    let out = buddy(dir.path(), &["run", "--scenario", "notes.json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("buy oat milk"), "{stdout}{stderr}");
    let listed = stderr
        .lines()
        .find(|l| l.starts_with("← fs__list_allowed_directories"))
        .unwrap_or_else(|| panic!("no listing: {stderr}"));
    let sandbox = dir.path().canonicalize().unwrap().display().to_string();
    assert!(
        listed.contains(&notes_dir.display().to_string()),
        "{listed}"
    );
    assert!(!listed.contains(&sandbox), "{listed}");
}
