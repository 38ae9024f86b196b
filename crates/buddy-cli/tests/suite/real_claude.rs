//! The real Claude Code CLI (`@anthropic-ai/claude-code` 2.1.328, pinned:
//! scripts/real-clis.sh) against `buddy serve` with scripted models that call Claude
//! Code's own `Bash` tool (issue 54, item 5): (a) Claude Code runs the tool and prints
//! the answer; (b) when the model repeats one failing command, buddy ends the loop and
//! Claude Code prints buddy's answer and exits 0 within a few calls; (c) a key at its
//! money ceiling gets buddy's answer saying so. Claude Code runs with an empty home, its
//! non-essential traffic, updater and telemetry off, and every proxy variable pointed at
//! a local listener that records what would have left the machine: nothing may.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use buddy_server::ServerSettings;
use serde_json::Value;

use super::server::{TestServer, all_scenarios, capped_server};

/// The key Claude Code sends buddy.
const KEY: &str = "sk-claude-test";

/// A local listener standing in for every proxy: it records the first line of each
/// request made through it (`CONNECT api.anthropic.com:443 …`) and refuses it.
struct Outside {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Outside {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut line = String::new();
                let _ = BufReader::new(&stream).read_line(&mut line);
                into.lock().unwrap().push(line.trim().to_owned());
                let _ = stream.write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n");
            }
        });
        Outside { url, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// Runs `claude -p PROMPT` (with `extra` arguments) in `work` against the server at
/// `url` with `model`; returns its exit code and its stdout and stderr together.
fn claude_print(
    claude: &str,
    url: &str,
    model: &str,
    work: &Path,
    prompt: &str,
    extra: &[&str],
) -> (i32, String, Vec<String>) {
    let home = tempfile::tempdir().unwrap();
    let outside = Outside::start();
    let mut command = std::process::Command::new("timeout");
    command
        .args(["120", claude, "-p", prompt, "--allowedTools", "Bash"])
        .args(extra)
        .current_dir(work)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("CLAUDE_CONFIG_DIR", home.path().join(".claude"))
        .env("ANTHROPIC_BASE_URL", url)
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ANTHROPIC_MODEL", model)
        .env("ANTHROPIC_SMALL_FAST_MODEL", model)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdin(std::process::Stdio::null());
    for proxy in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
        command.env(proxy, &outside.url);
    }
    let output = command.output().unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text, outside.seen())
}

/// The pinned CLI, installed by scripts/real-clis.sh.
fn claude() -> String {
    std::env::var("BUDDY_CLAUDE").unwrap_or_else(|_| {
        panic!("BUDDY_CLAUDE is not set: run the suite with scripts/test.sh (or eval \"$(bash scripts/real-clis.sh)\"), which installs the Claude Code CLI")
    })
}

/// Runs Claude Code in a fresh directory holding `hello.txt` on a blocking thread.
async fn run(server: &TestServer, model: &str, prompt: &str, extra: &[&str]) -> (i32, String) {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("hello.txt"), "hi\n").unwrap();
    let (claude, url, dir) = (claude(), server.url.clone(), work.path().to_owned());
    let (model, prompt) = (model.to_owned(), prompt.to_owned());
    let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
    let (code, text, outside) = tokio::task::spawn_blocking(move || {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        claude_print(&claude, &url, &model, &dir, &prompt, &extra)
    })
    .await
    .unwrap();
    assert!(
        outside.is_empty(),
        "Claude Code tried to reach the outside: {outside:?}\n{text}"
    );
    (code, text)
}

/// The Bash commands Claude Code ran, from its `stream-json` output.
fn bash_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if event["type"] != "assistant" {
            continue;
        }
        for block in event["message"]["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_use" && block["name"] == "Bash" {
                out.push(block["input"]["command"].as_str().unwrap_or("").to_owned());
            }
        }
    }
    out
}

/// The `result` line of Claude Code's `stream-json` output.
fn result_of(text: &str) -> Value {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "result")
        .unwrap_or_else(|| panic!("no result line: {text}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_real_claude_code_cli_runs_its_tool_through_buddy_and_is_stopped_in_a_loop() {
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let server = TestServer::start(
        &db.path().join("c.db"),
        scenarios.path(),
        ServerSettings::default(),
    )
    .await;
    // (a) The model runs `ls` through Claude Code's Bash tool and answers from it.
    let (code, text) = run(&server, "scripted:claude_ls", "What files are here?", &[]).await;
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("The directory holds hello.txt."), "{text}");
    // (b) The model repeats `cat notes.txt`, which fails the same way each time: buddy
    // ends the loop across Claude Code's round trips and Claude Code prints its answer.
    let json = ["--output-format", "stream-json", "--verbose"];
    let (code, text) = run(&server, "scripted:claude_repeat", "Show the notes.", &json).await;
    assert_eq!(code, 0, "{text}");
    let result = result_of(&text);
    assert_eq!(result["is_error"], false, "{text}");
    let answer = result["result"].as_str().unwrap_or_default();
    assert!(answer.contains("every attempt to read it failed"), "{text}");
    let runs = bash_commands(&text);
    assert!(
        runs.iter().all(|c| c == "cat notes.txt") && (3..=10).contains(&runs.len()),
        "Claude Code ran {runs:?}: {text}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_real_claude_code_cli_is_stopped_by_its_keys_money_ceiling() {
    // buddy's scripted model counts a token per 4 characters of what it is sent: one of
    // Claude Code's requests (its system prompt and tools) costs some $0.004 at $1 a
    // million, and a turn starts a call only with room for it and an answer; the key
    // may spend $0.02 a day: a few round trips, then buddy's answer.
    let (_db, _scenarios, server) = capped_server(KEY, "claude", 0.02).await;
    let json = ["--output-format", "stream-json", "--verbose"];
    let (code, text) = run(&server, "scripted:claude_spend", "Look around.", &json).await;
    assert_eq!(code, 0, "{text}");
    let result = result_of(&text);
    let answer = result["result"].as_str().unwrap_or_default();
    assert!(
        answer.contains("this key has reached its spend ceiling")
            && answer.contains("Key `claude`"),
        "{text}"
    );
    let runs = bash_commands(&text);
    assert!(
        (1..=4).contains(&runs.len()),
        "Claude Code ran {runs:?}: {text}"
    );
    // The next session of the key is answered at once, in plain text.
    let (code, text) = run(&server, "scripted:claude_ls", "What files are here?", &[]).await;
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("this key has reached its spend ceiling"),
        "{text}"
    );
    server.stop().await;
}
