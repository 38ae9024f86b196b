//! `buddy serve` over real HTTP on 127.0.0.1: the SSE chat API, persistence across
//! restarts, auth, bad input, disconnects, quotas, shutdown, and the OpenAI endpoint.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use buddy_cli::backend::ConfiguredBackend;
use buddy_cli::config::BuddyConfig;
use buddy_core::{Price, Usd};
use buddy_server::{ApiKey, AppState, ServerSettings, SpendCeiling};
use buddy_skills::Sandbox;
use buddy_store::SqliteStore;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::scenarios_dir;

/// Every repository scenario plus the test-only ones, in one directory.
pub fn all_scenarios() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/scenarios"
    ));
    for source in [scenarios_dir(), fixtures] {
        for entry in std::fs::read_dir(source).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    dir
}

pub struct TestServer {
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    handle: tokio::task::JoinHandle<Result<(), buddy_server::ServeError>>,
    _sandbox: tempfile::TempDir,
}

impl TestServer {
    pub async fn start(db: &Path, scenarios: &Path, settings: ServerSettings) -> Self {
        buddy_providers::install_crypto_provider();
        let sandbox = tempfile::tempdir().unwrap();
        let config = BuddyConfig::default();
        let backend = ConfiguredBackend::new(
            &config,
            Sandbox::new(sandbox.path()).unwrap(),
            Some(scenarios),
            &|_| None,
        )
        .unwrap();
        let store = SqliteStore::open(db).unwrap();
        let state = AppState::new(
            Arc::new(store),
            Arc::new(backend),
            config.policy.clone(),
            settings,
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(buddy_server::serve(state, listener, async move {
            let _ = stopped.await;
        }));
        TestServer {
            url,
            stop: Some(stop),
            handle,
            _sandbox: sandbox,
        }
    }

    /// Sends the shutdown signal and waits (bounded) for the server to finish.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(Duration::from_secs(30), &mut self.handle)
            .await
            .expect("the server stops in time")
            .unwrap()
            .unwrap();
    }
}

pub fn client() -> reqwest::Client {
    buddy_providers::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// The server's `/metrics` text, sent with `key` when the server needs one.
async fn metrics_text(url: &str, key: Option<&str>) -> String {
    let mut request = client().get(format!("{url}/metrics"));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    request.send().await.unwrap().text().await.unwrap()
}

/// (event name, JSON data) pairs of an SSE body.
pub fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter_map(|block| {
            let mut name = String::from("message");
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    name = v.to_owned();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            (!data.is_empty()).then(|| {
                (
                    name,
                    serde_json::from_str(&data).unwrap_or(Value::String(data)),
                )
            })
        })
        .collect()
}

/// A server over every scenario whose one key `key` (named `name`) may spend `daily`
/// dollars a day, with every model priced $1 a million tokens in and out; the
/// directories it stands on are held by the caller.
pub async fn capped_server(
    key: &str,
    name: &str,
    daily: f64,
) -> (tempfile::TempDir, tempfile::TempDir, TestServer) {
    let mut settings = ServerSettings {
        api_keys: vec![
            ApiKey::new(key, Some(name), false).with_spend(SpendCeiling {
                daily: Usd::from_dollars(daily),
                monthly: None,
            }),
        ],
        ..ServerSettings::default()
    };
    let price = Price {
        input: 1.0,
        output: 1.0,
        cached_input: None,
        cache_write: None,
        cache_write_1h: None,
    };
    settings.prices.add(None, "*", price);
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let server = TestServer::start(&db.path().join("c.db"), scenarios.path(), settings).await;
    (db, scenarios, server)
}

/// GETs `url` and reads its JSON body.
pub async fn get_json(url: &str) -> Value {
    client()
        .get(url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

pub async fn chat(url: &str, body: Value) -> (u16, String) {
    let response = client()
        .post(format!("{url}/v1/chat"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_turn_streams_its_events_in_order() {
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let server = TestServer::start(
        &db.path().join("b.db"),
        scenarios.path(),
        ServerSettings::default(),
    )
    .await;
    let (status, body) = chat(
        &server.url,
        json!({"message": "How much was Ada's order?", "model": "scripted:chain_3_steps"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let events = sse_events(&body);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"conversation"));
    assert!(
        events[0].1["conversation_id"]
            .as_str()
            .unwrap()
            .starts_with("conv_")
    );
    assert_eq!(names.last(), Some(&"done"));
    assert_eq!(
        names
            .iter()
            .filter(|n| **n == "done" || **n == "error")
            .count(),
        1
    );
    let tools: Vec<&str> = events
        .iter()
        .filter(|(n, _)| n == "tool_call_start")
        .map(|(_, d)| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["find_user", "get_orders", "get_invoice"]);
    for (name, data) in &events[1..] {
        assert_eq!(
            data["type"].as_str(),
            Some(name.as_str()),
            "each SSE event is named by its type"
        );
    }
    let done = &events.last().unwrap().1;
    assert_eq!(done["reason"], "completed");
    assert!(done["answer"].as_str().unwrap().contains("129.90"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conversation_resumes_after_a_restart_with_the_same_database() {
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let path = db.path().join("buddy.db");
    let server = TestServer::start(&path, scenarios.path(), ServerSettings::default()).await;
    let (_, body) = chat(&server.url, json!({"message": "what time is it?"})).await;
    let id = sse_events(&body)[0].1["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    server.stop().await;

    let server = TestServer::start(&path, scenarios.path(), ServerSettings::default()).await;
    let (status, body) = chat(
        &server.url,
        json!({"conversation_id": id, "message": "now list the files"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sse_events(&body).last().unwrap().1["reason"], "completed");
    let detail: Value = get_json(&format!("{}/v1/conversations/{id}", server.url)).await;
    let roles: Vec<&str> = detail["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant"
        ]
    );
    let turns = detail["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    assert!(
        turns
            .iter()
            .all(|t| t["stop_reason"] == "completed" && t["stats"]["model_calls"] == 2)
    );
    let list: Value = get_json(&format!("{}/v1/conversations", server.url)).await;
    assert_eq!(list["data"][0]["id"], id.as_str());
    assert_eq!(list["data"][0]["title"], "what time is it?");
    let deleted = client()
        .delete(format!("{}/v1/conversations/{id}", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    let deleted: Value = deleted.json().await.unwrap();
    assert_eq!(deleted["deleted"], true);
    let gone = client()
        .get(format!("{}/v1/conversations/{id}", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_is_required_when_keys_are_configured() {
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let settings = ServerSettings {
        api_keys: vec![buddy_server::ApiKey::new("sk-right", None, false)],
        ..ServerSettings::default()
    };
    let server = TestServer::start(&db.path().join("b.db"), scenarios.path(), settings).await;
    let c = client();
    let none = c
        .get(format!("{}/v1/models", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(none.status(), 401);
    let body: Value = none.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Authorization: Bearer")
    );
    let wrong = c
        .get(format!("{}/v1/models", server.url))
        .bearer_auth("sk-wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let chat = c
        .post(format!("{}/v1/chat", server.url))
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(chat.status(), 401);
    let right = c
        .get(format!("{}/v1/models", server.url))
        .bearer_auth("sk-right")
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);
    let models: Value = right.json().await.unwrap();
    assert!(
        models["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["id"] == "scripted:get_time_forever")
    );
    let health = c
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200, "health checks need no key");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_a_400_or_413_that_names_the_problem() {
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let settings = ServerSettings {
        max_body_bytes: 4096,
        ..ServerSettings::default()
    };
    let server = TestServer::start(&db.path().join("b.db"), scenarios.path(), settings).await;
    let c = client();
    let post = |body: String| {
        c.post(format!("{}/v1/chat", server.url))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    for (body, status, expected) in [
        ("{not json".to_owned(), 400, "not valid JSON"),
        (json!({"mesage": "hi"}).to_string(), 400, "mesage"),
        (
            json!({"message": "  "}).to_string(),
            400,
            "`message` is empty",
        ),
        (
            json!({"message": "hi", "policy": {"max_modle_calls": 3}}).to_string(),
            400,
            "max_modle_calls",
        ),
        (
            json!({"message": "hi", "policy": {"max_model_calls": 100000}}).to_string(),
            400,
            "max_model_calls",
        ),
        (
            json!({"message": "hi", "policy": {"on_limit": "explode"}}).to_string(),
            400,
            "on_limit",
        ),
        (
            json!({"message": "hi", "model": "scripted:nope"}).to_string(),
            400,
            "no scripted scenario named `nope`",
        ),
        (
            json!({"message": "hi", "conversation_id": "conv_missing"}).to_string(),
            404,
            "conv_missing",
        ),
        (
            json!({"message": "x".repeat(10_000)}).to_string(),
            413,
            "larger than 4096 bytes",
        ),
    ] {
        let response = post(body.clone()).await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{body:.80}");
        let error: Value = response.json().await.unwrap();
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{body:.80}: {message}");
    }
    server.stop().await;
}

/// Reads an SSE response until `needle` appears, then returns it (still open).
/// Reads `response` until its text so far contains `needle`.
pub async fn read_until(response: &mut reqwest::Response, needle: &str) {
    let mut seen = String::new();
    while !seen.contains(needle) {
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk())
            .await
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(
            &chunk.expect("stream ended early"),
        ));
    }
}

/// Starts a turn whose tool takes a minute; returns the open stream (the tool is
/// running) and the conversation id.
pub async fn start_slow_turn(url: &str) -> (reqwest::Response, String) {
    let (mut response, id) = start_chat(
        url,
        json!({"message": "wait for it", "model": "scripted:slow_tool"}),
    )
    .await;
    read_until(&mut response, "tool_call_start").await;
    (response, id)
}

/// Posts `body` to `/v1/chat`; returns the streaming response once its first event
/// (the conversation's id) has come, and that id.
pub async fn start_chat(url: &str, body: Value) -> (reqwest::Response, String) {
    let mut response = client()
        .post(format!("{url}/v1/chat"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let first = String::from_utf8_lossy(&response.chunk().await.unwrap().unwrap()).into_owned();
    let id = sse_events(&first)[0].1["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (response, id)
}

async fn last_stop_reason(url: &str, id: &str) -> Option<String> {
    let detail: Value = client()
        .get(format!("{url}/v1/conversations/{id}"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    detail["turns"].as_array()?.last()?["stop_reason"]
        .as_str()
        .map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread")]
async fn set_to_cancel_on_disconnect_a_client_that_leaves_mid_turn_cancels_it_and_it_is_recorded() {
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let settings = ServerSettings {
        cancel_on_disconnect: true,
        ..ServerSettings::default()
    };
    let server = TestServer::start(&db.path().join("b.db"), scenarios.path(), settings).await;
    let (response, id) = start_slow_turn(&server.url).await;
    drop(response);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut reason = None;
    while Instant::now() < deadline {
        reason = last_stop_reason(&server.url, &id).await;
        if reason.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(reason.as_deref(), Some("cancelled"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_past_its_concurrent_turn_cap_gets_429() {
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let settings = ServerSettings {
        max_concurrent_turns_per_key: 1,
        shutdown_grace: Duration::from_millis(200),
        cancel_on_disconnect: true,
        ..ServerSettings::default()
    };
    let server = TestServer::start(&db.path().join("b.db"), scenarios.path(), settings).await;
    let (busy, _) = start_slow_turn(&server.url).await;
    let second = client()
        .post(format!("{}/v1/chat", server.url))
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 429);
    let error: Value = second.json().await.unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_concurrent_turns_per_key")
    );
    drop(busy);
    // The slot comes back once the cancelled turn is recorded.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut status = 429;
    while status == 429 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        status = client()
            .post(format!("{}/v1/chat", server.url))
            .json(&json!({"message": "hi"}))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
    }
    assert_eq!(status, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_lets_turns_finish_up_to_the_grace_period_then_records_them_cancelled() {
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let settings = ServerSettings {
        shutdown_grace: Duration::from_millis(300),
        ..ServerSettings::default()
    };
    let path = db.path().join("b.db");
    let server = TestServer::start(&path, scenarios.path(), settings).await;
    let (response, id) = start_slow_turn(&server.url).await;
    let reader = tokio::spawn(async move { response.text().await.unwrap_or_default() });
    server.stop().await;
    let rest = reader.await.unwrap();
    assert!(
        rest.contains("\"reason\":\"cancelled\""),
        "the client saw the turn end: {rest}"
    );
    let store = SqliteStore::open(&path).unwrap();
    let detail = buddy_store::Conversations::get_conversation(&store, &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        detail
            .turns
            .last()
            .unwrap()
            .stop_reason
            .map(buddy_store::TurnEnd::as_str),
        Some("cancelled")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_turns_guards_and_calls() {
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let server = TestServer::start(
        &db.path().join("b.db"),
        scenarios.path(),
        ServerSettings::default(),
    )
    .await;
    chat(
        &server.url,
        json!({"message": "go", "model": "scripted:get_time_forever"}),
    )
    .await;
    let text = metrics_text(&server.url, None).await;
    for needle in [
        "buddy_turns_total{stop_reason=\"loop_detected\"}",
        "buddy_guard_trips_total{guard=\"repetition\",action=\"finalize\"}",
        "buddy_model_calls_per_turn_bucket",
        "buddy_tool_calls_per_turn_bucket",
        "buddy_provider_first_token_seconds_bucket",
        "buddy_tokens_total{direction=\"input\"}",
    ] {
        assert!(
            text.contains(needle),
            "{needle} missing from /metrics:\n{text}"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openai_python_sdk_works_against_the_server() {
    let python = std::env::var("BUDDY_OPENAI_PYTHON").unwrap_or_else(|_| {
        panic!("BUDDY_OPENAI_PYTHON is not set: run the suite with scripts/test.sh, which installs the openai SDK")
    });
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let settings = ServerSettings {
        api_keys: vec![buddy_server::ApiKey::new("sk-buddy-sdk", None, false)],
        ..ServerSettings::default()
    };
    let server = TestServer::start(&db.path().join("b.db"), scenarios.path(), settings).await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/openai_sdk_check.py"
    );
    let args = vec![script.into(), server.url.clone(), "sk-buddy-sdk".into()];
    let stdout = run_client(python, args).await;
    assert!(stdout.contains("openai sdk: all checks passed"), "{stdout}");
    // The failed turn ran once, whatever the SDK's retry policy.
    let metrics = metrics_text(&server.url, Some("sk-buddy-sdk")).await;
    assert!(
        metrics.contains("buddy_turns_total{stop_reason=\"max_model_calls\"} 1\n"),
        "{metrics}"
    );
    server.stop().await;
}

/// Runs `program args…` against the server and returns its stdout, failing on an error.
pub(super) async fn run_client(program: String, args: Vec<String>) -> String {
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&program)
            .args(&args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
    })
    .await
    .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert!(output.status.success(), "{stdout}\n{stderr}");
    stdout
}

/// The openai Node SDK, the Vercel AI SDK (its default Responses provider and its chat
/// provider, with tools) and LangChain's ChatOpenAI in both modes, each in the patterns
/// its documentation shows (`clients/node/check.mjs`, `scripts/langchain_check.py`).
#[tokio::test(flavor = "multi_thread")]
async fn the_node_and_langchain_clients_work_against_the_server() {
    let missing = |var: &str| {
        panic!(
            "{var} is not set: run the suite with scripts/test.sh, which installs the pinned clients"
        )
    };
    let node_clients =
        std::env::var("BUDDY_NODE_CLIENTS").unwrap_or_else(|_| missing("BUDDY_NODE_CLIENTS"));
    let langchain = std::env::var("BUDDY_LANGCHAIN_PYTHON")
        .unwrap_or_else(|_| missing("BUDDY_LANGCHAIN_PYTHON"));
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let settings = ServerSettings {
        api_keys: vec![buddy_server::ApiKey::new("sk-buddy-clients", None, false)],
        ..ServerSettings::default()
    };
    let server = TestServer::start(&db.path().join("c.db"), scenarios.path(), settings).await;
    let key = "sk-buddy-clients".to_owned();
    let node = run_client(
        "node".into(),
        vec![
            format!("{node_clients}/check.mjs"),
            server.url.clone(),
            key.clone(),
        ],
    )
    .await;
    assert!(node.contains("node clients: 18 checks passed"), "{node}");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/langchain_check.py"
    );
    let chain = run_client(langchain, vec![script.into(), server.url.clone(), key]).await;
    assert!(chain.contains("langchain: 10 checks passed"), "{chain}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn streamed_completions_separate_narration_but_never_lead_with_blank_lines() {
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let server = TestServer::start(
        &db.path().join("b.db"),
        scenarios.path(),
        ServerSettings::default(),
    )
    .await;
    let content = |body: String| -> String {
        body.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|c| {
                c["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    };
    let stream = |model: &str| {
        client()
            .post(format!("{}/v1/chat/completions", server.url))
            .json(&json!({"model": model, "stream": true, "messages": [{"role": "user", "content": "go"}]}))
            .send()
    };
    // Silent tool rounds, then the answer: nothing before it.
    let silent = content(
        stream("scripted:get_time_forever")
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    assert_eq!(silent, "It is 12:00 UTC on 22 November 2026.");
    // Narrated tool rounds: each narration separated by a blank line.
    let narrated = content(
        stream("scripted:chain_3_steps")
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    assert_eq!(
        narrated,
        "Let me find Ada first.\n\nNow her orders.\n\nLet me check the invoice.\n\nAda's latest order (o_7, 2 November 2026) came to 129.90 EUR."
    );
    server.stop().await;
}

/// A client that declares tools of its own (as LangChain's `bind_tools` or the AI SDK's
/// `tools` do) against a scripted model that does not call them gets its answer on
/// Chat Completions and Responses, not a 502.
#[tokio::test(flavor = "multi_thread")]
async fn a_scripted_model_answers_a_request_that_declares_client_tools() {
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let server = TestServer::start(
        &db.path().join("b.db"),
        scenarios.path(),
        ServerSettings::default(),
    )
    .await;
    let parameters = json!({"type": "object", "properties": {"q": {"type": "string"}}});
    let chat = client()
        .post(format!("{}/v1/chat/completions", server.url))
        .json(&json!({"model": "scripted:plain_chat",
                      "messages": [{"role": "user", "content": "Say hello."}],
                      "tools": [{"type": "function", "function": {"name": "lookup", "parameters": parameters}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(chat.status(), 200);
    let chat: Value = chat.json().await.unwrap();
    assert_eq!(chat["choices"][0]["finish_reason"], "stop", "{chat}");
    assert!(
        chat["choices"][0]["message"]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("Hello")),
        "{chat}"
    );
    let responses = client()
        .post(format!("{}/v1/responses", server.url))
        .json(
            &json!({"model": "scripted:plain_chat", "input": "Say hello.",
                      "tools": [{"type": "function", "name": "lookup", "parameters": parameters}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(responses.status(), 200);
    let responses: Value = responses.json().await.unwrap();
    assert_eq!(responses["status"], "completed", "{responses}");
    server.stop().await;
}
