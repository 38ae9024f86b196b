//! `buddy run --provider …` against OpenAI-compatible and Messages servers on 127.0.0.1.

use std::process::{Command, Output, Stdio};

use buddy_testkit::{MockResponse, MockServer, anthropic_sse, openai_sse};
use serde_json::json;

/// Runs `buddy` with `args` in `cwd` (off the async runtime), with `env` added.
async fn buddy(cwd: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_buddy"));
    cmd.current_dir(cwd).args(args).stdin(Stdio::null());
    for (key, _) in std::env::vars() {
        if key.starts_with("BUDDY_") || key.ends_with("_API_KEY") {
            cmd.env_remove(key);
        }
    }
    for (key, value) in env {
        cmd.env(key, value);
    }
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn run_against_an_openai_compatible_server() {
    let server = MockServer::sequence(vec![
        MockResponse::sse(openai_sse("", &[("call_1", "list_dir", "{}")])),
        MockResponse::sse(openai_sse("The workspace holds notes.txt.", &[])),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hi").unwrap();
    let base = format!("{}/v1", server.url());
    let out = buddy(
        dir.path(),
        &[
            "run",
            "--provider",
            "openai",
            "--base-url",
            &base,
            "--model",
            "qwen-test",
            "What is here?",
        ],
        &[("OPENAI_API_KEY", "sk-from-env")],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "The workspace holds notes.txt.");
    assert!(
        text(&out.stderr).contains("← list_dir: notes.txt (2 bytes)"),
        "{}",
        text(&out.stderr)
    );
    let requests = server.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-from-env")
    );
    let body = requests[1].json();
    assert_eq!(body["model"], "qwen-test");
    assert_eq!(body["messages"][2]["role"], "tool");
    let names: Vec<String> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "get_time",
            "read_file",
            "write_file",
            "list_dir",
            "search_files"
        ],
        "the configured built-ins"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn run_against_a_messages_server_configured_in_buddy_toml() {
    let server =
        MockServer::always(MockResponse::sse(anthropic_sse("Hello from Claude.", &[]))).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        format!(
            r#"
default_provider = "claude"
[providers.claude]
kind = "anthropic"
base_url = "{}"
model = "claude-test"
api_key_env = "MY_CLAUDE_KEY"
max_output_tokens = 321
[providers.claude.http]
max_retries = 0
"#,
            server.url()
        ),
    )
    .unwrap();
    let out = buddy(
        dir.path(),
        &["run", "--json", "hi"],
        &[("MY_CLAUDE_KEY", "sk-ant-env")],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(r#""answer":"Hello from Claude.""#));
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some("sk-ant-env"));
    assert_eq!(request.json()["max_tokens"], json!(321));
    assert_eq!(request.json()["model"], "claude-test");

    // --provider anthropic --base-url works without any config too.
    let empty = tempfile::tempdir().unwrap();
    let out = buddy(
        empty.path(),
        &[
            "run",
            "--provider",
            "anthropic",
            "--base-url",
            &server.url(),
            "--model",
            "m",
            "hi",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread")]
async fn provider_failures_exit_1_with_a_clear_message() {
    let server = MockServer::always(MockResponse::json(
        401,
        &json!({"error": {"message": "Incorrect API key"}}),
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.url());
    let out = buddy(
        dir.path(),
        &[
            "run",
            "--provider",
            "openai",
            "--base-url",
            &base,
            "--model",
            "m",
            "hi",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("provider_error")
            && stderr.contains("HTTP 401")
            && stderr.contains("check the API key"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn provider_choice_mistakes_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = buddy(dir.path(), &["run", "--provider", "gemini", "hi"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no provider named `gemini`"),
        "{}",
        text(&out.stderr)
    );
    let out = buddy(dir.path(), &["run", "--provider", "openai", "hi"], &[]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("needs a model"),
        "{}",
        text(&out.stderr)
    );
    let out = buddy(
        dir.path(),
        &[
            "run",
            "--provider",
            "openai",
            "--model",
            "m",
            "--scenario",
            "x.json",
            "hi",
        ],
        &[],
    )
    .await;
    assert!(
        text(&out.stderr).contains("--scenario plays the scripted model"),
        "{}",
        text(&out.stderr)
    );
    let out = buddy(
        dir.path(),
        &[
            "run",
            "--provider",
            "openai",
            "--model",
            "m",
            "--base-url",
            "ftp://x",
            "hi",
        ],
        &[],
    )
    .await;
    assert!(
        text(&out.stderr).contains("must start with http://"),
        "{}",
        text(&out.stderr)
    );
}

/// Issue 60, item 2: a sub-agent of buddy.toml naming another `model` is priced from the
/// same `prices` as the session's model (it was priced from the built-in list, where a
/// model it does not know costs nothing).
#[tokio::test(flavor = "multi_thread")]
async fn a_sub_agent_on_another_model_is_priced_from_buddy_toml() {
    // Each reply reports 20 input and 10 output tokens.
    let server = MockServer::sequence(vec![
        MockResponse::sse(openai_sse(
            "",
            &[("call_1", "helper", r#"{"task": "add up"}"#)],
        )),
        MockResponse::sse(openai_sse("It adds up to 4.", &[])),
        MockResponse::sse(openai_sse("The helper says 4.", &[])),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        format!(
            r#"
default_provider = "main"
[providers.main]
kind = "openai"
base_url = "{}/v1"
model = "top-model"
[providers.main.http]
max_retries = 0
[providers.main.prices]
"top-model" = {{ input = 1000, output = 1000 }}
"child-model" = {{ input = 100000, output = 100000 }}

[[agents]]
name = "helper"
description = "Adds things up."
model = "child-model"
"#,
            server.url()
        ),
    )
    .unwrap();
    let out = buddy(
        dir.path(),
        &["run", "--json", "add 2 and 2"],
        &[("OPENAI_API_KEY", "sk-test")],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let done: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "done")
        .unwrap_or_else(|| panic!("no done event: {stdout}"));
    assert_eq!(server.requests()[1].json()["model"], "child-model");
    // Two calls of the turn at $0.03, one of the helper at $3.00.
    let cost = done["stats"]["cost_usd"].as_f64().unwrap_or_default();
    assert!((cost - 3.06).abs() < 1e-9, "{done}");
}
