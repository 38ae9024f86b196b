//! The programs buddy starts cannot read its secrets: a command skill that reads
//! `/proc/<buddy>/environ` (its parent's) gets nothing, and its own environment is clean.
//! Run as root, the check runs buddy as `nobody` (root may read any process).

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

const SECRET: &str = "sk-proc-secret-7f3a9c";

/// `buddy ARGS` as this user, or as `nobody` when this is root.
fn buddy_unprivileged(cwd: &std::path::Path, args: &[&str]) -> Command {
    let root = rustix::process::getuid().is_root();
    let mut cmd = if root {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_buddy"));
        cmd
    } else {
        Command::new(env!("CARGO_BIN_EXE_buddy"))
    };
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", cwd)
        .env("OPENAI_API_KEY", SECRET)
        .env("NO_COLOR", "1");
    cmd
}

#[test]
fn a_command_skill_cannot_read_buddys_environment() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        r#"
[skills]
sandbox = "."
builtin = []
[[skills.command]]
name = "peek"
description = "Reads what it can of its parent."
command = ["sh", "-c", "exec 2>&1; tr '\\0' '\\n' < /proc/$PPID/environ; echo; env"]
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("peek.json"),
        r#"{"name": "peek", "prompt": "peek", "tools": [],
  "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
  "rules": [
    {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "peek", "arguments": {}}]}},
    {"when": {}, "reply": {"text": "Saw: {last_result}"}}]}"#,
    )
    .unwrap();
    for file in ["buddy.toml", "peek.json"] {
        std::fs::set_permissions(
            dir.path().join(file),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
    }
    let out = buddy_unprivileged(dir.path(), &["run", "--json", "--scenario", "peek.json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The skill ran (and saw its own, clean environment)…
    assert!(stdout.contains("tool_call_result"), "{stdout}{stderr}");
    assert!(stdout.contains("BUDDY_SKILL=peek"), "{stdout}{stderr}");
    // …but not buddy's: reading its parent's environment is refused.
    assert!(stdout.contains("Permission denied"), "{stdout}{stderr}");
    assert!(!stdout.contains(SECRET), "the secret leaked: {stdout}");
}
