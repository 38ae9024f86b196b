//! The per-iteration benchmark: what buddy's library costs in CPU per model call over a
//! bare HTTP client doing the same loop. Both drive the same `buddy mock-server`
//! process on 127.0.0.1 (a scripted model that asks for `calls` tool calls one round
//! at a time, then answers: one of the workloads in `iteration_workload`), alternately,
//! in this one process; the process's CPU time
//! (`CLOCK_PROCESS_CPUTIME_ID`, every thread) is read around each batch of runs. The
//! mock runs in its own process, so its CPU is not counted.
//!
//! - raw: a `reqwest` loop that posts the conversation and its tool schema, reads the
//!   SSE reply, parses each chunk with `serde_json`, assembles the tool calls, appends
//!   the assistant message and the tool's result, and posts again.
//! - buddy: `Engine::run_collect` over `OpenAiProvider` and a skill registry holding
//!   the same tool, with the default loop policy: the whole turn, events included.

use std::path::Path;
use std::sync::Arc;

use buddy_core::{ChatEvent, StopReason};
use buddy_engine::{Engine, TurnRequest};
use buddy_providers::{OpenAiOptions, OpenAiProvider};
use buddy_skills::SkillRegistry;
use futures::StreamExt;
use serde::Serialize;

use crate::BenchError;
use serde_json::{Value, json};

use super::iteration_workload::{BenchTool, PROMPT, Workload};
use super::load::spawn;

/// What to run.
#[derive(Clone, Debug)]
pub struct IterationOptions {
    /// The kind of turn both loops make.
    pub workload: Workload,
    /// Tool calls per turn (one per round); the turn makes one more model call.
    pub calls: usize,
    /// Turns of each loop per repeat, taking turns run by run.
    pub runs: usize,
    pub repeats: usize,
    /// Streamed replies (buddy's default) or whole ones.
    pub stream: bool,
    /// Run only this side (`raw` or `buddy`), for profiling one of them.
    pub only: Option<Side>,
    /// The model name both loops send (it picks buddy's tokenizer: `gpt-4o…` is o200k).
    pub model: String,
    /// Both loops on one thread (a `current_thread` runtime) instead of a worker of the
    /// multi-thread one: no wake-ups of a second worker, so what is left is the work itself.
    pub single_thread: bool,
    /// buddy's turn read as [`Engine::events`] (run on the reading task) instead of
    /// [`Engine::spawn`] (the README's shape: a task of its own).
    pub events_inline: bool,
}

/// One of the two loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Raw = 0,
    Buddy = 1,
}

impl Side {
    /// Its name, as `--only` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Raw => "raw",
            Side::Buddy => "buddy",
        }
    }
}

/// One loop's CPU and wall time per turn in one repeat.
#[derive(Clone, Debug, Serialize)]
pub struct Batch {
    pub side: Side,
    pub repeat: usize,
    pub cpu_ms_per_run: f64,
    pub wall_ms_per_run: f64,
}

/// Every batch, and buddy's added CPU per iteration (medians of the repeats).
#[derive(Clone, Debug, Serialize)]
pub struct IterationReport {
    pub workload: Workload,
    pub model_calls_per_run: usize,
    pub runs: usize,
    pub stream: bool,
    /// The loops ran on a `current_thread` runtime.
    pub single_thread: bool,
    /// buddy's turn was read as `Engine::events`, not spawned.
    pub events_inline: bool,
    pub batches: Vec<Batch>,
    pub raw_cpu_ms_per_run: Option<f64>,
    pub buddy_cpu_ms_per_run: Option<f64>,
    /// Median over the repeats of (buddy − raw) / model calls per run, in µs.
    pub added_cpu_us_per_iteration: Option<f64>,
}

/// CPU time of this process, every thread, in seconds.
fn cpu_secs() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// Runs the benchmark with the `buddy` binary at `buddy` as the mock server.
pub async fn run_iteration(
    buddy: &Path,
    options: &IterationOptions,
) -> Result<IterationReport, BenchError> {
    measure_iteration(buddy, options)
        .await
        .map_err(BenchError::Failed)
}

/// The benchmark, its failure in words.
async fn measure_iteration(
    buddy: &Path,
    options: &IterationOptions,
) -> Result<IterationReport, String> {
    let dir = std::env::temp_dir().join(format!("buddy-iteration-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("scenarios")).map_err(|e| e.to_string())?;
    let scenario = options.workload.scenario(&options.model, options.calls);
    let scenario_json = scenario.to_string();
    std::fs::write(dir.join("scenarios/model.json"), scenario_json).map_err(|e| e.to_string())?;
    let scenarios = dir.join("scenarios").display().to_string();
    let spawned = spawn(
        buddy,
        &[
            "mock-server",
            "--listen",
            "127.0.0.1:0",
            "--scenarios",
            &scenarios,
        ],
        &dir,
    );
    let result = match spawned {
        // On a runtime of its own with one thread: nothing to wake on another worker.
        Ok((_mock, base)) if options.single_thread => {
            let options = options.clone();
            tokio::task::spawn_blocking(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start a current_thread runtime: {e}"))?
                    .block_on(measure(&base, &options))
            })
            .await
            .map_err(|e| e.to_string())?
        }
        // On a worker thread, like a server's tasks (a `block_on` thread would make every
        // wake-up of the connection's task a hop between threads, for both loops).
        Ok((_mock, base)) => {
            let options = options.clone();
            tokio::spawn(async move { measure(&base, &options).await })
                .await
                .map_err(|e| e.to_string())?
        }
        Err(e) => Err(e),
    };
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn measure(base: &str, options: &IterationOptions) -> Result<IterationReport, String> {
    buddy_providers::install_crypto_provider();
    let model = options.model.as_str();
    let calls = options.calls + 1;
    let raw = RawLoop::new(base, model, options.stream, options.workload)?;
    let engine = buddy_engine(base, options.stream, options.workload)?;
    // Warm both: connections, allocator, lazily built tables.
    for _ in 0..3 {
        check(raw.run().await?, calls, "raw")?;
        check(
            buddy_run(&engine, model, options.events_inline).await?,
            calls,
            "buddy",
        )?;
    }
    // The two loops take turns run by run (which goes first alternates), so drift in the
    // machine's speed falls on both alike; each side's time is summed over its runs.
    let sides: Vec<Side> = [Side::Raw, Side::Buddy]
        .into_iter()
        .filter(|side| options.only.is_none_or(|only| only == *side))
        .collect();
    let mut batches = Vec::new();
    for repeat in 0..options.repeats {
        let mut spent = [(0.0, 0.0); 2];
        for i in 0..options.runs {
            for k in 0..sides.len() {
                let side = sides[(i + k) % sides.len()];
                let (cpu, wall) = (cpu_secs(), std::time::Instant::now());
                let made = match side {
                    Side::Raw => raw.run().await?,
                    Side::Buddy => buddy_run(&engine, model, options.events_inline).await?,
                };
                let slot = &mut spent[side as usize];
                slot.0 += cpu_secs() - cpu;
                slot.1 += wall.elapsed().as_secs_f64();
                check(made, calls, "a measured run")?;
            }
        }
        let runs = options.runs.max(1) as f64;
        for side in &sides {
            let (cpu, wall) = spent[*side as usize];
            batches.push(Batch {
                side: *side,
                repeat,
                cpu_ms_per_run: cpu * 1000.0 / runs,
                wall_ms_per_run: wall * 1000.0 / runs,
            });
        }
    }
    let median = |side: Side| {
        let mut v: Vec<f64> = batches
            .iter()
            .filter(|b| b.side == side)
            .map(|b| b.cpu_ms_per_run)
            .collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let (raw_ms, buddy_ms) = (median(Side::Raw), median(Side::Buddy));
    let mut added: Vec<f64> = (0..options.repeats)
        .filter_map(|repeat| {
            let cpu = |side| {
                batches
                    .iter()
                    .find(|b| b.repeat == repeat && b.side == side)
                    .map(|b| b.cpu_ms_per_run)
            };
            Some((cpu(Side::Buddy)? - cpu(Side::Raw)?) * 1000.0 / calls as f64)
        })
        .collect();
    added.sort_by(f64::total_cmp);
    Ok(IterationReport {
        workload: options.workload,
        model_calls_per_run: calls,
        runs: options.runs,
        stream: options.stream,
        single_thread: options.single_thread,
        events_inline: options.events_inline,
        raw_cpu_ms_per_run: raw_ms,
        buddy_cpu_ms_per_run: buddy_ms,
        added_cpu_us_per_iteration: added.get(added.len() / 2).copied(),
        batches,
    })
}

fn check(made: usize, expected: usize, what: &str) -> Result<(), String> {
    if made == expected {
        Ok(())
    } else {
        Err(format!(
            "{what} made {made} model calls, not {expected}: the loops are not doing the same work"
        ))
    }
}

fn buddy_engine(base: &str, stream: bool, workload: Workload) -> Result<Arc<Engine>, String> {
    let provider = OpenAiProvider::new(OpenAiOptions {
        name: "mock".into(),
        base_url: base.to_owned(),
        stream,
        ..OpenAiOptions::default()
    })
    .map_err(|e| e.to_string())?;
    let mut registry = SkillRegistry::new();
    registry
        .register(Arc::new(BenchTool(workload)))
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(Engine::new(
        Arc::new(provider),
        Arc::new(registry),
    )))
}

/// One buddy turn; the model calls it made.
async fn buddy_run(engine: &Arc<Engine>, model: &str, inline: bool) -> Result<usize, String> {
    let mut events = Vec::new();
    let outcome = if inline {
        // The turn run by the task reading its events.
        let mut stream = engine.events(TurnRequest::new(model, PROMPT));
        while let Some(event) = stream.next().await {
            events.push(event);
        }
        stream
            .outcome()
            .ok_or("the turn's stream ended without an outcome")?
    } else {
        // The README's shape: the turn on its own task, its events read as they come.
        let (mut rx, turn) = engine.spawn(TurnRequest::new(model, PROMPT));
        while let Some(event) = rx.recv().await {
            events.push(event);
        }
        turn.await.map_err(|e| e.to_string())?
    };
    if outcome.reason != StopReason::Completed {
        let said: Vec<String> = events
            .iter()
            .filter_map(|e| match e {
                ChatEvent::Error { message, .. } => Some(message.clone()),
                ChatEvent::GuardTripped { .. } => serde_json::to_string(e).ok(),
                _ => None,
            })
            .collect();
        return Err(format!(
            "buddy's turn ended with {} after {} model calls: {}",
            outcome.reason,
            outcome.stats.model_calls,
            said.join("; ")
        ));
    }
    Ok(outcome.stats.model_calls as usize)
}

/// The bare client: what an application calling the API itself would do per round.
struct RawLoop {
    client: reqwest::Client,
    url: String,
    model: String,
    stream: bool,
    tools: Value,
    workload: Workload,
}

/// A tool call being assembled from stream deltas.
#[derive(Default)]
struct RawCall {
    id: String,
    name: String,
    arguments: String,
}

impl RawLoop {
    fn new(base: &str, model: &str, stream: bool, workload: Workload) -> Result<Self, String> {
        Ok(RawLoop {
            client: reqwest::Client::builder()
                .build()
                .map_err(|e| e.to_string())?,
            url: format!("{base}/chat/completions"),
            model: model.to_owned(),
            stream,
            tools: json!([{"type": "function", "function": workload.tool_spec()}]),
            workload,
        })
    }

    /// One turn; the model calls it made.
    async fn run(&self) -> Result<usize, String> {
        let mut messages = vec![json!({"role": "user", "content": PROMPT})];
        for round in 1..=100 {
            let mut body = json!({"model": self.model, "messages": messages, "tools": self.tools});
            if self.stream {
                body["stream"] = json!(true);
                body["stream_options"] = json!({"include_usage": true});
            }
            let response = self
                .client
                .post(&self.url)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&body).map_err(|e| e.to_string())?)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            if !response.status().is_success() {
                return Err(format!("raw loop: HTTP {}", response.status()));
            }
            let (text, calls) = if self.stream {
                read_stream(response).await?
            } else {
                read_whole(response).await?
            };
            if calls.is_empty() {
                return Ok(round);
            }
            let tool_calls: Vec<Value> = calls
                .iter()
                .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                .collect();
            messages.push(json!({"role": "assistant", "content": text, "tool_calls": tool_calls}));
            for call in &calls {
                let args: Value = serde_json::from_str(&call.arguments)
                    .map_err(|e| format!("raw loop: bad arguments: {e}"))?;
                messages.push(
                    json!({"role": "tool", "tool_call_id": call.id, "content": self.workload.result(&args)}),
                );
            }
        }
        Err("raw loop: the model never answered".into())
    }
}

async fn read_stream(mut response: reqwest::Response) -> Result<(String, Vec<RawCall>), String> {
    let (mut text, mut calls, mut pending) = (String::new(), Vec::<RawCall>::new(), Vec::new());
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let Some(data) = line.strip_prefix(b"data:") else {
                continue;
            };
            let data = data.trim_ascii();
            if data == b"[DONE]" {
                continue;
            }
            let event: Value = serde_json::from_slice(data).map_err(|e| e.to_string())?;
            let delta = &event["choices"][0]["delta"];
            if let Some(t) = delta["content"].as_str() {
                text.push_str(t);
            }
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let index = call["index"].as_u64().unwrap_or(0) as usize;
                if calls.len() <= index {
                    calls.resize_with(index + 1, RawCall::default);
                }
                let slot = &mut calls[index];
                if let Some(id) = call["id"].as_str() {
                    slot.id.push_str(id);
                }
                if let Some(name) = call["function"]["name"].as_str() {
                    slot.name.push_str(name);
                }
                if let Some(args) = call["function"]["arguments"].as_str() {
                    slot.arguments.push_str(args);
                }
            }
        }
    }
    Ok((text, calls))
}

async fn read_whole(response: reqwest::Response) -> Result<(String, Vec<RawCall>), String> {
    let body: Value = response.json().await.map_err(|e| e.to_string())?;
    let message = &body["choices"][0]["message"];
    let calls = message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| RawCall {
            id: c["id"].as_str().unwrap_or_default().to_owned(),
            name: c["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            arguments: c["function"]["arguments"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        })
        .collect();
    Ok((
        message["content"].as_str().unwrap_or_default().to_owned(),
        calls,
    ))
}
