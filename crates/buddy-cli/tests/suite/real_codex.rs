//! The real codex CLI (`@openai/codex` 0.169.0, pinned: scripts/real-clis.sh) against
//! `buddy serve` with a scripted model that calls codex's own `exec_command` tool
//! (issue 54, item 5): codex runs the tool and prints the answer; and when the model
//! repeats one failing command, buddy ends the loop and codex prints buddy's answer and
//! exits 0 within a few calls; and a key at its money ceiling gets buddy's answer
//! saying so, which codex prints as the session's last message.

use std::path::Path;

use buddy_server::ServerSettings;

use super::server::{TestServer, all_scenarios, capped_server};

/// Runs `codex exec PROMPT` in `work` against the server at `url` with `model`; returns
/// its exit code and its stdout and stderr together.
fn codex_exec(codex: &str, url: &str, model: &str, work: &Path, prompt: &str) -> (i32, String) {
    codex_exec_as(codex, url, model, work, prompt, "sk-codex")
}

/// [`codex_exec`] with the API key `key`.
fn codex_exec_as(
    codex: &str,
    url: &str,
    model: &str,
    work: &Path,
    prompt: &str,
    key: &str,
) -> (i32, String) {
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "model = \"{model}\"\nmodel_provider = \"buddy\"\n\n[model_providers.buddy]\nname = \"buddy\"\nbase_url = \"{url}/v1\"\nwire_api = \"responses\"\nenv_key = \"BUDDY_CODEX_KEY\"\n"
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let output = std::process::Command::new("timeout")
        .args(["120", codex, "exec", "--skip-git-repo-check", prompt])
        .current_dir(work)
        .env("CODEX_HOME", home.path())
        .env("BUDDY_CODEX_KEY", key)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_real_codex_cli_runs_its_tool_through_buddy_and_is_stopped_in_a_loop() {
    let codex = std::env::var("BUDDY_CODEX").unwrap_or_else(|_| {
        panic!("BUDDY_CODEX is not set: run the suite with scripts/test.sh (or eval \"$(bash scripts/real-clis.sh)\"), which installs the codex CLI")
    });
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let server = TestServer::start(
        &db.path().join("c.db"),
        scenarios.path(),
        ServerSettings::default(),
    )
    .await;
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("hello.txt"), "hi\n").unwrap();
    let (url, dir) = (server.url.clone(), work.path().to_owned());
    let (code, text) = tokio::task::spawn_blocking(move || {
        codex_exec(
            &codex,
            &url,
            "scripted:codex_ls",
            &dir,
            "What files are here?",
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("The directory holds hello.txt."), "{text}");
    // The model repeats `cat notes.txt`, which fails the same way each time: buddy ends
    // the loop across codex's round trips and codex prints buddy's answer.
    let codex = std::env::var("BUDDY_CODEX").unwrap_or_default();
    let (url, dir) = (server.url.clone(), work.path().to_owned());
    let (code, text) = tokio::task::spawn_blocking(move || {
        codex_exec(
            &codex,
            &url,
            "scripted:codex_repeat",
            &dir,
            "Show the notes.",
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("every attempt to read it failed"), "{text}");
    let runs = text.matches("cat notes.txt").count();
    assert!(
        (3..=10).contains(&runs),
        "codex ran the command {runs} times: {text}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_real_codex_cli_is_stopped_by_its_keys_money_ceiling() {
    let codex = std::env::var("BUDDY_CODEX").unwrap_or_else(|_| {
        panic!("BUDDY_CODEX is not set: run the suite with scripts/test.sh (or eval \"$(bash scripts/real-clis.sh)\"), which installs the codex CLI")
    });
    // buddy's scripted model counts a token per 4 characters of what it is sent: one of
    // codex's requests costs some $0.001 at $1 a million (its first is estimated at
    // several times that), and a turn starts a call only with room for it and an
    // answer; the key may spend $0.014 a day: some round trips, then buddy's answer.
    let (_db, _scenarios, server) = capped_server("sk-codex-capped", "codex", 0.014).await;
    let work = tempfile::tempdir().unwrap();
    let (url, dir) = (server.url.clone(), work.path().to_owned());
    let (code, text) = tokio::task::spawn_blocking(move || {
        let model = "scripted:codex_spend";
        codex_exec_as(&codex, &url, model, &dir, "Look around.", "sk-codex-capped")
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("this key has reached its spend ceiling") && text.contains("Key `codex`"),
        "{text}"
    );
    let runs = text.matches("echo step").count();
    assert!((1..=20).contains(&runs), "codex ran {runs} steps: {text}");
    assert!(!text.contains("429"), "no error codex retried: {text}");
    server.stop().await;
}
