//! Crash safety: `kill -9` the real server mid-turn; every message written before the
//! kill is in the database (a call message always, before its tools run) and the
//! conversation goes on after a restart.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use super::server::{
    all_scenarios, client, get_json, read_until, sse_events, start_chat, start_slow_turn,
};

/// Starts `buddy ARGS` (a `serve`) in `cwd` with `env` set; returns the child and the
/// base URL it printed.
pub fn spawn_buddy(args: &[&std::ffi::OsStr], cwd: &Path, env: &[(&str, &str)]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_buddy"))
        .args(args)
        .current_dir(cwd)
        .env_remove("BUDDY_API_KEYS")
        .env_remove("BUDDY_STORE")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in stderr.lines() {});
    (child, url)
}

/// Starts `buddy serve` on a free port with `env` set; returns the child and its base URL.
pub fn spawn_server(
    db: &Path,
    scenarios: &Path,
    cwd: &Path,
    env: &[(&str, &str)],
) -> (Child, String) {
    let args = [
        "serve".as_ref(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
        "--scenarios".as_ref(),
        scenarios.as_os_str(),
    ];
    spawn_buddy(&args, cwd, env)
}

#[tokio::test(flavor = "multi_thread")]
async fn killing_the_server_mid_turn_loses_nothing_already_produced() {
    let (dir, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let db = dir.path().join("crash.db");
    let (mut server, url) = spawn_server(&db, scenarios.path(), dir.path(), &[]);

    let (response, id) = start_slow_turn(&url).await;
    // The model asked for the slow tool; the engine has recorded its message before running it.
    server.kill().unwrap();
    server.wait().unwrap();
    drop(response);

    let (mut server, url) = spawn_server(&db, scenarios.path(), dir.path(), &[]);
    let detail = conversation(&url, &id).await;
    let messages = detail["messages"].as_array().unwrap();
    assert_eq!(
        messages[0],
        json!({"role": "user", "content": "wait for it"})
    );
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"], "Waiting.");
    assert_eq!(messages[1]["tool_calls"][0]["name"], "wait_a_minute");
    assert_eq!(
        messages.len(),
        2,
        "the tool never finished, so it has no result"
    );
    assert_eq!(
        detail["turns"][0]["stop_reason"], "interrupted",
        "the killed turn is marked on restart"
    );

    // The conversation goes on: the next turn's request is valid because the dangling
    // call from the killed turn is answered before it goes to the model.
    let body = next_turn(&url, &id).await;
    let events = sse_events(&body);
    assert_eq!(events.last().unwrap().0, "done", "{body}");
    assert_eq!(events.last().unwrap().1["reason"], "completed", "{body}");
    server.kill().unwrap();
    server.wait().unwrap();
}

/// The stored conversation `id` as `GET /v1/conversations/{id}` shows it.
pub async fn conversation(url: &str, id: &str) -> Value {
    get_json(&format!("{url}/v1/conversations/{id}")).await
}

/// The SSE body of a next turn of `id` ("what time is it?", offline scenario).
pub async fn next_turn(url: &str, id: &str) -> String {
    client()
        .post(format!("{url}/v1/chat"))
        .json(&json!({"conversation_id": id, "message": "what time is it?", "model": "scripted:offline_assistant"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Starts `buddy mock-server` answering every model call after `latency_ms`; returns
/// the child and its base URL.
fn spawn_mock_model(cwd: &Path, latency_ms: u64) -> (Child, String) {
    let latency = latency_ms.to_string();
    let scenarios = super::scenarios_dir();
    let args = [
        "mock-server".as_ref(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--latency-ms".as_ref(),
        std::ffi::OsStr::new(&latency),
        "--scenarios".as_ref(),
        scenarios.as_os_str(),
    ];
    spawn_buddy(&args, cwd, &[])
}

/// A round's results go in together the moment its last one is in, before the model is
/// called again: killed while the model works on its next reply, the server has lost
/// nothing a tool produced. The round (its call and its result) is on record after a
/// restart, the turn reads `interrupted`, and the next turn goes on from it.
#[tokio::test(flavor = "multi_thread")]
async fn killing_the_server_while_the_model_answers_a_round_keeps_the_round_and_goes_on() {
    let (dir, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    // Every model call waits 3 s: the kill lands while the second one waits.
    let (mut mock, mock_url) = spawn_mock_model(dir.path(), 3000);
    std::fs::create_dir_all(dir.path().join("sandbox")).unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        format!(
            "default_provider = \"mock\"\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{mock_url}\"\nmodel = \"scripted:three_rounds\"\n[providers.mock.http]\nmax_retries = 0\n[skills]\nsandbox = \"sandbox\"\n"
        ),
    )
    .unwrap();
    let db = dir.path().join("crash.db");
    let args = [
        "--config".as_ref(),
        "buddy.toml".as_ref(),
        "serve".as_ref(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--db".as_ref(),
        db.as_os_str(),
        "--scenarios".as_ref(),
        scenarios.path().as_os_str(),
    ];
    let (mut server, url) = spawn_buddy(&args, dir.path(), &[]);

    let (mut response, id) = start_chat(
        &url,
        json!({"message": "Check the time, look at the workspace, and find where buddy is mentioned."}),
    )
    .await;
    // The first round's tool has answered; the model now works on its second reply
    // (3 s), and the round is on record before that call is made.
    read_until(&mut response, "tool_call_result").await;
    let stored = async || -> usize {
        let detail = conversation(&url, &id).await;
        detail["messages"].as_array().map_or(0, Vec::len)
    };
    let waited = std::time::Instant::now();
    while stored().await < 3 {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(2),
            "the round's result is written before the next model call"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    server.kill().unwrap();
    server.wait().unwrap();
    drop(response);

    let (mut server, url) = spawn_buddy(&args, dir.path(), &[]);
    let detail = conversation(&url, &id).await;
    let messages = detail["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user", "{detail}");
    assert_eq!(messages[1]["role"], "assistant", "{detail}");
    assert_eq!(messages[1]["tool_calls"][0]["name"], "get_time", "{detail}");
    assert_eq!(messages[2]["role"], "tool", "{detail}");
    assert_eq!(
        messages.len(),
        3,
        "the round is whole on record, nothing after it: {detail}"
    );
    assert_eq!(detail["turns"][0]["stop_reason"], "interrupted", "{detail}");

    let body = next_turn(&url, &id).await;
    let events = sse_events(&body);
    assert_eq!(events.last().unwrap().1["reason"], "completed", "{body}");
    let detail = conversation(&url, &id).await;
    let messages = detail["messages"].as_array().unwrap();
    let call = messages[1]["tool_calls"][0]["id"].as_str().unwrap();
    assert_eq!(messages[2]["role"], "tool", "{detail}");
    assert_eq!(
        messages[2]["tool_call_id"], call,
        "the call keeps the result its tool gave: {detail}"
    );
    assert!(
        !messages[2]["content"]
            .as_str()
            .unwrap_or_default()
            .contains("interrupted"),
        "{detail}"
    );
    assert_eq!(messages[3]["role"], "user", "{detail}");
    server.kill().unwrap();
    server.wait().unwrap();
    mock.kill().unwrap();
    mock.wait().unwrap();
}

/// `buddy serve` started outside the checkout, with named keys from buddy.toml.
#[tokio::test(flavor = "multi_thread")]
async fn serve_outside_the_checkout_has_the_scenarios_and_named_keys() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("buddy.toml"),
        r#"
[server]
db = "data/buddy.db"
[[server.keys]]
name = "alice"
key_env = "TEST_ALICE_KEY"
[[server.keys]]
name = "ops"
key_sha256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
admin = true
"#,
    )
    .unwrap();
    let args =
        ["--config", "buddy.toml", "serve", "--listen", "127.0.0.1:0"].map(std::ffi::OsStr::new);
    let (mut child, url) = spawn_buddy(&args, dir.path(), &[("TEST_ALICE_KEY", "sk-alice-secret")]);

    let models = |key: &'static str| {
        let url = url.clone();
        async move {
            client()
                .get(format!("{url}/v1/models"))
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(models("sk-wrong").await.status(), 401);
    let listed: Value = models("sk-alice-secret").await.json().await.unwrap();
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    for scenario in [
        "scripted:chain_3_steps",
        "scripted:paging_12",
        "scripted:offline_assistant",
    ] {
        assert!(ids.contains(&scenario), "{scenario} missing from {ids:?}");
    }
    // Alice's conversation; the admin key (known only by its hash) sees it too.
    let body = client()
        .post(format!("{url}/v1/chat"))
        .bearer_auth("sk-alice-secret")
        .json(&json!({"message": "How much was Ada's latest order?", "model": "scripted:chain_3_steps"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        sse_events(&body).last().unwrap().1["reason"],
        "completed",
        "{body}"
    );
    let all: Value = client()
        .get(format!("{url}/v1/conversations"))
        .bearer_auth("abc")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(all["data"].as_array().unwrap().len(), 1, "{all}");
    assert!(dir.path().join("data/buddy.db").exists());
    child.kill().unwrap();
    child.wait().unwrap();
}
