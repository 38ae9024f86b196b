//! buddy's own cost per loop iteration.
//!
//! Run: `cargo bench -p buddy-cli --bench overhead`
//!
//! - `engine_alone`: whole turns of 10 and of 20 model calls against a provider that
//!   answers by call number in constant time, over a history of 10, 100 or 1,000
//!   messages with 10 KB tool results. The difference between the 20- and the 10-call
//!   turn, divided by 10, is the cost of one iteration (turn setup cancels out); the
//!   allocation profiler counts allocations the same way.
//! - `engine_traced`: the same with telemetry on (spans exported to a loopback collector).
//! - `continued_*`: a one-call turn that continues a stored conversation of 10, 100 or
//!   1,000 messages, its history counted (`counted`) or with the token counts kept with
//!   it (`kept`, as `buddy serve` stores them): what a continued turn's setup costs.
//! - `http_*`: one chat completion through buddy's OpenAI provider, the same request
//!   with a bare reqwest client, and a whole one-call engine turn, all against
//!   `buddy mock-server` on 127.0.0.1.

// Measurement code: a broken setup should stop the benchmark loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{CompletionRequest, Message, Provider, ToolCall, ToolOutcome};
use buddy_engine::{Engine, LoopPolicy, TurnRequest};
use buddy_providers::{OpenAiOptions, OpenAiProvider};
use buddy_scripted::Scenario;
use buddy_scripted::mock_server::MockServer;
use buddy_testkit::{ReplyProvider, TestTool, TestToolbox, reply_tokens};
use divan::{AllocProfiler, Bencher};

#[global_allocator]
static ALLOC: AllocProfiler = AllocProfiler::system();

fn main() {
    divan::main();
}

const WORDS: [&str; 16] = [
    "anchor", "bridge", "candle", "dragon", "ember", "falcon", "glacier", "harbor", "island",
    "jungle", "kettle", "lantern", "meadow", "nectar", "orchid", "pepper",
];

/// A finished conversation of `len` messages whose tool results are ~10 KB each.
fn history(len: usize) -> Vec<Message> {
    let mut out = vec![
        Message::system("You are a careful assistant."),
        Message::user("Look into it."),
    ];
    let mut i = 0;
    while out.len() + 2 < len {
        out.push(Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall::new(
                format!("old_{i}"),
                "read",
                format!("{{\"part\":{i}}}"),
            )],
        });
        out.push(Message::tool_result(
            format!("old_{i}"),
            format!("part {i}: {}", "lorem ipsum ".repeat(850)),
            false,
        ));
        i += 1;
    }
    out.push(Message::assistant("Here is what I found."));
    out
}

fn engine(rounds: usize) -> Engine {
    // Stateless, like a real model: the round is the number of its replies since the user spoke.
    let provider = ReplyProvider::new(move |request, _| {
        // Replies since the user spoke (buddy's notes in between do not count).
        let messages = request.messages;
        let after_user = messages
            .iter()
            .rposition(Message::is_user)
            .map_or(0, |u| u + 1);
        let i = messages[after_user..]
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        Ok(if i < rounds {
            reply_tokens(
                "",
                vec![ToolCall::new(
                    format!("c{i}"),
                    "step",
                    format!("{{\"i\":{i}}}"),
                )],
            )
        } else {
            reply_tokens("All done.", vec![])
        })
    });
    let tool = TestTool::new(|_, n| {
        ToolOutcome::ok(format!(
            "the {} {} is ready",
            WORDS[n % 16],
            WORDS[(n / 16) % 16]
        ))
    });
    Engine::new(
        Arc::new(provider),
        Arc::new(TestToolbox::new().with("step", tool)),
    )
}

fn policy() -> LoopPolicy {
    LoopPolicy {
        context_window: Some(100_000_000),
        ..LoopPolicy::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[divan::bench(consts = [10, 20], args = [10, 100, 1000])]
fn engine_alone<const CALLS: usize>(bencher: Bencher, history_len: usize) {
    let rt = runtime();
    let engine = engine(CALLS - 1);
    let request = TurnRequest::new("bench", "And now?")
        .with_history(history(history_len))
        .with_policy(policy());
    bencher
        .with_inputs(|| request.clone())
        .bench_local_values(|request| {
            let (_, outcome) = rt.block_on(engine.run_collect(request));
            assert_eq!(outcome.stats.model_calls as usize, CALLS);
            outcome
        });
}

/// A one-call turn of `model` over `history_len` messages, with the counts a store kept
/// (`kept`) or none.
fn continued(bencher: Bencher, model: &str, history_len: usize, kept: bool) {
    let rt = runtime();
    let engine = engine(0);
    let history = history(history_len);
    let counts = match kept {
        true => {
            let counter = buddy_engine::context::counter_for_model(model);
            let key = buddy_engine::context::count_key(&*counter);
            history
                .iter()
                .map(|m| {
                    Some(buddy_core::TokenCount {
                        encoding: key.clone(),
                        tokens: counter.message(m) as u64,
                    })
                })
                .collect()
        }
        false => Vec::new(),
    };
    let request = TurnRequest::new(model, "And now?")
        .with_history(history)
        .with_history_counts(counts)
        .with_policy(policy());
    bencher
        .with_inputs(|| request.clone())
        .bench_local_values(|request| {
            let (_, outcome) = rt.block_on(engine.run_collect(request));
            assert_eq!(outcome.stats.model_calls, 1);
            outcome
        });
}

#[divan::bench(args = [10, 100, 1000])]
fn continued_counted(bencher: Bencher, history_len: usize) {
    continued(bencher, "bench", history_len, false);
}

#[divan::bench(args = [10, 100, 1000])]
fn continued_kept(bencher: Bencher, history_len: usize) {
    continued(bencher, "bench", history_len, true);
}

/// The same for an OpenAI model (exact BPE counts), over 100 messages (1 MB).
#[divan::bench(sample_count = 10)]
fn continued_o200k_counted(bencher: Bencher) {
    continued(bencher, "gpt-4o", 100, false);
}

#[divan::bench(sample_count = 10)]
fn continued_o200k_kept(bencher: Bencher) {
    continued(bencher, "gpt-4o", 100, true);
}

/// `engine_alone` with history 10 and telemetry on: every turn's spans recorded and
/// exported over OTLP/HTTP to a collector on 127.0.0.1 (the cost of tracing when it is on).
#[divan::bench(consts = [10, 20])]
fn engine_traced<const CALLS: usize>(bencher: Bencher) {
    let rt = runtime();
    let _entered = rt.enter();
    let collector = rt.block_on(buddy_testkit::MockServer::always(
        buddy_testkit::MockResponse::status(200, "application/x-protobuf", Vec::new()),
    ));
    let telemetry = buddy_telemetry::Telemetry::start(&buddy_telemetry::TelemetryConfig {
        endpoint: Some(collector.url()),
        ..Default::default()
    })
    .unwrap();
    let engine = engine(CALLS - 1);
    let request = TurnRequest::new("bench", "And now?")
        .with_history(history(10))
        .with_policy(policy());
    bencher
        .with_inputs(|| {
            request
                .clone()
                .with_observer(telemetry.turn(buddy_telemetry::TurnScope {
                    provider: "bench",
                    model: "bench",
                    ..Default::default()
                }))
        })
        .bench_local_values(|request| {
            let (_, outcome) = rt.block_on(engine.run_collect(request));
            assert_eq!(outcome.stats.model_calls as usize, CALLS);
            outcome
        });
    rt.block_on(telemetry.shutdown());
}

/// The mock server on 127.0.0.1 and a runtime to talk to it.
struct HttpSetup {
    rt: tokio::runtime::Runtime,
    base: String,
}

fn http_setup() -> HttpSetup {
    buddy_providers::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let scenario = Scenario::load(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/plain_chat.json"
    )))
    .unwrap();
    let base = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let router = MockServer::new(vec![scenario], Duration::ZERO, None).router();
        tokio::spawn(async move { axum::serve(listener, router).await });
        base
    });
    HttpSetup { rt, base }
}

fn provider(base: &str) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiOptions {
        name: "mock".into(),
        base_url: base.to_owned(),
        ..OpenAiOptions::default()
    })
    .unwrap()
}

#[divan::bench]
fn http_raw_client(bencher: Bencher) {
    let setup = http_setup();
    let client = reqwest::Client::new();
    let url = format!("{}/chat/completions", setup.base);
    let body = serde_json::json!({
        "model": "scripted:plain_chat", "messages": [{"role": "user", "content": "Say hello."}],
        "stream": true, "stream_options": {"include_usage": true}
    })
    .to_string();
    bencher.bench_local(|| {
        setup.rt.block_on(async {
            let response = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await
                .unwrap();
            response.text().await.unwrap().len()
        })
    });
}

#[divan::bench]
fn http_buddy_provider(bencher: Bencher) {
    let setup = http_setup();
    let provider = provider(&setup.base);
    let history = [Message::user("Say hello.")];
    bencher.bench_local(|| {
        setup.rt.block_on(async {
            provider
                .complete(CompletionRequest::new("scripted:plain_chat", &history))
                .await
                .unwrap()
                .text
                .len()
        })
    });
}

#[divan::bench]
fn http_engine_turn(bencher: Bencher) {
    let setup = http_setup();
    let engine = Engine::new(
        Arc::new(provider(&setup.base)),
        Arc::new(TestToolbox::new()),
    );
    let request = TurnRequest::new("scripted:plain_chat", "Say hello.");
    bencher
        .with_inputs(|| request.clone())
        .bench_local_values(|request| {
            let (_, outcome) = setup.rt.block_on(engine.run_collect(request));
            outcome
        });
}
