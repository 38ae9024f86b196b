//! `[[mcp]]` in buddy.toml: `buddy mcp list`, and a turn of `buddy run` using a tool of
//! the real `mcp-server-time` (installed, pinned, by scripts/test.sh).

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

fn time_server() -> String {
    let path = std::env::var_os("BUDDY_MCP_TIME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../target/mcp-venv/bin/mcp-server-time"
            ))
        });
    assert!(
        path.exists(),
        "{} is missing: run scripts/test.sh (or scripts/mcp-servers.sh), or set BUDDY_MCP_TIME",
        path.display()
    );
    path.display().to_string()
}

fn buddy(dir: &Path, args: &[&str]) -> Output {
    super::buddy(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn config(dir: &Path, extra: &str) {
    let text = format!(
        "[[mcp]]\nname = \"time\"\ncommand = [{:?}]\n{extra}",
        time_server()
    );
    std::fs::write(dir.join("buddy.toml"), text).unwrap();
}

#[test]
fn mcp_list_shows_each_server_its_state_and_tools() {
    let dir = tempfile::tempdir().unwrap();
    config(
        dir.path(),
        "\n[[mcp]]\nname = \"ghost\"\ncommand = [\"/no/such/server\"]\n\n[approval.skills]\n\"time__convert_time\" = \"always\"\n",
    );
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "one server is down: {stdout}");
    assert!(stdout.contains("running: mcp-time"), "{stdout}");
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name}: {stdout}"))
            .to_owned()
    };
    assert!(line("time__get_current_time").contains("runs without asking"));
    assert!(line("time__convert_time").contains("asks first"));
    assert!(stdout.contains("ghost"), "{stdout}");
    assert!(
        stdout.contains("not available") && stdout.contains("/no/such/server"),
        "{stdout}"
    );
}

#[test]
fn a_run_calls_a_tool_of_a_configured_mcp_server() {
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), "");
    let scenario = r#"{"name": "clock", "prompt": "time?", "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
      "rules": [
        {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}]}},
        {"when": {}, "reply": {"text": "Now: {last_result}"}}]}"#;
    std::fs::write(dir.path().join("clock.json"), scenario).unwrap();
    let out = buddy(dir.path(), &["run", "--scenario", "clock.json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with("Now: "), "{stdout}");
    let result = stderr
        .lines()
        .find(|l| l.starts_with("← time__get_current_time"))
        .unwrap_or_else(|| panic!("no result line: {stderr}"));
    assert!(result.contains("\"timezone\": \"UTC\""), "{result}");
}

#[test]
fn a_bad_mcp_entry_is_refused_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        "[[mcp]]\nname = \"x\"\ncommand = [\"a\"]\nurl = \"http://127.0.0.1:1/mcp\"\n",
    )
    .unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("both `command` and `url`"), "{stderr}");
}

/// A Claude Desktop configuration with two servers: `mcp_import` takes both into
/// buddy (their tools listed by `buddy mcp list`), and `buddy mcp import` prints them as
/// `[[mcp]]` entries that buddy.toml accepts as they are.
#[test]
fn servers_come_from_a_claude_desktop_config() {
    let dir = tempfile::tempdir().unwrap();
    let claude = serde_json::json!({"mcpServers": {
        "time": {"command": time_server(), "args": []},
        "clock": {"command": time_server(), "args": ["--local-timezone", "Europe/Paris"],
                  "env": {"TZ": "Europe/Paris"}},
    }});
    std::fs::write(
        dir.path().join("claude_desktop_config.json"),
        claude.to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        "mcp_import = [\"claude_desktop_config.json\"]\n",
    )
    .unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    for tool in ["time__get_current_time", "clock__get_current_time"] {
        assert!(stdout.contains(tool), "{tool} missing:\n{stdout}");
    }
    assert!(stdout.contains("--local-timezone Europe/Paris"), "{stdout}");

    let out = buddy(dir.path(), &["mcp", "import", "claude_desktop_config.json"]);
    let toml = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{toml}");
    assert_eq!(toml.matches("[[mcp]]").count(), 2, "{toml}");
    std::fs::write(dir.path().join("buddy.toml"), &toml).unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // The same server in both places is refused by name.
    std::fs::write(
        dir.path().join("buddy.toml"),
        format!("mcp_import = [\"claude_desktop_config.json\"]\n{toml}"),
    )
    .unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("also an [[mcp]] entry"), "{stderr}");
}

/// `command` may name the program alone, with `args`, as MCP clients write it.
#[test]
fn command_and_args_work_in_buddy_toml() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        format!(
            "[[mcp]]\nname = \"time\"\ncommand = {:?}\nargs = [\"--local-timezone\", \"UTC\"]\n",
            time_server()
        ),
    )
    .unwrap();
    let out = buddy(dir.path(), &["mcp", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("time__get_current_time"), "{stdout}");
}

/// `buddy doctor` starts every `[[mcp]]` server: a good one is listed with its tools, one
/// that exits at once is named with what it printed, and the exit code says so.
#[test]
fn doctor_checks_every_mcp_server_and_quotes_a_failing_ones_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        format!(
            "[[mcp]]\nname = \"broken\"\ncommand = [\"sh\", \"-c\", \"echo 'ModuleNotFoundError: no module named mcp_thing' >&2; exit 3\"]\n\n\
             [[mcp]]\nname = \"time\"\ncommand = [{:?}]\n",
            time_server()
        ),
    )
    .unwrap();
    let out = buddy(dir.path(), &["doctor"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let broken = stdout
        .lines()
        .find(|l| l.contains("broken:"))
        .unwrap_or_default();
    assert!(
        broken.contains("failed to start") && broken.contains("no module named mcp_thing"),
        "{stdout}"
    );
    assert!(
        !broken.contains("within"),
        "an exit is not a timeout: {broken}"
    );
    assert!(
        stdout.contains("time: ok, 2 tool(s): time__get_current_time"),
        "{stdout}"
    );
}
