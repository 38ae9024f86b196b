//! Approval questions at a real terminal (a pseudo-terminal driven by a small Python
//! script): y, n with a reason, e with new arguments; a run without a terminal refuses;
//! `buddy chat` offers to continue a capped turn.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A scenario that writes `haiku.txt` with `write_file`, then reports the result.
const WRITER: &str = r#"{"name": "writer", "prompt": "write a haiku to haiku.txt",
  "tools": [{"builtin": "write_file"}],
  "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
  "rules": [
    {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "write_file", "arguments": {"path": "haiku.txt", "content": "old pond"}}]}},
    {"when": {}, "reply": {"text": "Result: {last_result}"}}]}"#;

fn driver() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pty_driver.py"))
}

/// `buddy ARGS` on a pseudo-terminal, typing `answers` as their questions appear.
pub fn on_terminal(dir: &Path, answers: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String) {
    let steps = serde_json::to_string(answers).unwrap();
    let out: Output = Command::new("python3")
        .arg(driver())
        .arg(steps)
        .arg(env!("CARGO_BIN_EXE_buddy"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code(), text)
}

fn writer(dir: &Path) -> String {
    let path = dir.join("writer.json");
    std::fs::write(&path, WRITER).unwrap();
    path.display().to_string()
}

fn run_args(scenario: &str) -> Vec<&str> {
    vec!["run", "--scenario", scenario, "--sandbox", "."]
}

#[test]
fn yes_at_the_terminal_runs_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = writer(dir.path());
    let (code, out) = on_terminal(dir.path(), &[("Allow it?", "y\n")], &run_args(&scenario));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("`write_file` wants to run with"), "{out}");
    assert!(out.contains("effectful"), "{out}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("haiku.txt")).unwrap(),
        "old pond"
    );
}

#[test]
fn no_with_a_reason_leaves_the_sandbox_alone_and_the_model_reads_why() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = writer(dir.path());
    let (code, out) = on_terminal(
        dir.path(),
        &[("Allow it?", "n\n"), ("Why not?", "just show it\n")],
        &run_args(&scenario),
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(!dir.path().join("haiku.txt").exists());
    assert!(
        out.contains("Result: not run: the user rejected this call: just show it"),
        "{out}"
    );
}

#[test]
fn edit_runs_the_write_with_new_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = writer(dir.path());
    let (code, out) = on_terminal(
        dir.path(),
        &[
            ("Allow it?", "e\n"),
            ("New arguments", "not json\n"),
            ("try again", "e\n"),
            (
                "New arguments",
                "{\"path\": \"poem.txt\", \"content\": \"frog jumps\"}\n",
            ),
        ],
        &run_args(&scenario),
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(!dir.path().join("haiku.txt").exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("poem.txt")).unwrap(),
        "frog jumps"
    );
}

#[test]
fn a_run_without_a_terminal_refuses_the_write_and_still_answers() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = writer(dir.path());
    let out = super::buddy(dir.path())
        .args(run_args(&scenario))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(!dir.path().join("haiku.txt").exists());
    assert!(stdout.contains("needs a person's approval"), "{stdout}");
    assert!(
        stderr.contains("guard approval [write_file]: refused"),
        "{stderr}"
    );

    // Allowed by configuration, it runs.
    std::fs::write(
        dir.path().join("buddy.toml"),
        "[approval.skills]\nwrite_file = \"never\"\n",
    )
    .unwrap();
    let out = super::buddy(dir.path())
        .args(run_args(&scenario))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(dir.path().join("haiku.txt").exists());
}

/// Reads pages 1..=3 with a pure `read_page` stub; capped at 3 model calls it stops
/// after page 2 (the third call is the Finalize answer).
const PAGER: &str = r#"{"name": "pager", "prompt": "read the pages",
  "tools": [{"name": "read_page", "semantics": "pure", "template": "page {page} text"}],
  "policy": {"max_model_calls": 3},
  "expect": {"stop_reason": "max_model_calls", "model_calls": 3, "tool_calls": 2},
  "rules": [
    {"when": {"tools_offered": false}, "reply": {"text": "Stopped early; so far: {results}"}},
    {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "read_page", "arguments": {"page": 1}}]}},
    {"when": {"round": 2}, "reply": {"tool_calls": [{"name": "read_page", "arguments": {"page": 2}}]}},
    {"when": {"round": 4}, "reply": {"tool_calls": [{"name": "read_page", "arguments": {"page": 3}}]}},
    {"when": {}, "reply": {"text": "Read: {results}"}}]}"#;

#[test]
fn chat_offers_to_continue_a_capped_turn() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pager.json");
    std::fs::write(&path, PAGER).unwrap();
    let scenario = path.display().to_string();
    let (code, out) = on_terminal(
        dir.path(),
        &[
            ("you> ", "read the pages\n"),
            ("Continue it with a fresh budget?", "y\n"),
            ("you> ", "\u{4}"),
        ],
        &["chat", "--scenario", &scenario],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("stop: max_model_calls"), "{out}");
    assert!(out.contains("stop: completed"), "{out}");
    assert!(out.contains("page 3 text"), "{out}");
}
