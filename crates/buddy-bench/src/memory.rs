//! The memory benchmark: N turns at once against a real `buddy serve` process, each
//! with a model reply whose tool call carries a large argument (streamed in 64 KiB
//! pieces by `buddy mock-server`, as a real server does), to a command skill that counts
//! the bytes. Reports the server's peak resident memory over its baseline as a multiple
//! of the arguments in flight, what stays resident once the turns are over, and how
//! much the database grew per turn.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::BenchError;
use serde_json::json;

use super::load::{rss_kib, spawn, spawn_serve, status_kib};

/// What to run.
#[derive(Clone, Debug)]
pub struct MemoryOptions {
    /// Turns at once.
    pub turns: usize,
    /// Size of each reply's tool-call argument, in bytes.
    pub argument_bytes: usize,
    /// The `buddy` binary measured as the server (another build, for a before/after);
    /// `None`: the one running the benchmark.
    pub server: Option<std::path::PathBuf>,
}

/// What happened.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryReport {
    pub turns: usize,
    pub argument_mib: f64,
    pub completed: usize,
    pub first_error: Option<String>,
    pub rss_baseline_mib: f64,
    pub rss_peak_mib: f64,
    /// (peak − baseline) / (turns × argument size).
    pub peak_per_argument_byte: f64,
    /// Resident 2 s after the last turn ended, over the baseline.
    pub rss_after_mib: f64,
    /// Growth of the database file itself, per turn.
    pub db_growth_mib_per_turn: f64,
    /// The write-ahead log at the end (SQLite reuses it; checkpoints empty it).
    pub wal_mib: f64,
}

const MIB: f64 = 1024.0 * 1024.0;

/// The scenario the mock serves: one call of `count_bytes` with `size` bytes of text.
fn scenario(size: usize) -> serde_json::Value {
    json!({
        "name": "big_arguments",
        "description": "A reply whose tool call carries a large argument.",
        "prompt": "Count the bytes of this text.",
        "tools": [{"name": "count_bytes", "description": "Counts bytes.",
                   "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                   "template": "counted"}],
        "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
        "rules": [
            {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "count_bytes", "arguments": {"text": "a".repeat(size)}}]}},
            {"when": {}, "reply": {"text": "Counted: {last_result}"}}
        ]
    })
}

/// One turn against the server at `url`, its stream read as it comes; `Ok` when it
/// completed.
async fn one_turn(client: reqwest::Client, url: String) -> Result<(), String> {
    let mut response = client
        .post(format!("{url}/v1/chat"))
        .json(&json!({"message": "Count the bytes of this text."}))
        .send()
        .await
        .map_err(|e| format!("request: {e}"))?;
    // Read the stream as it comes, keeping only its end.
    let mut tail = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("stream: {e}"))? {
        tail.extend_from_slice(&chunk);
        if tail.len() > 4096 {
            tail.drain(..tail.len() - 4096);
        }
    }
    let tail = String::from_utf8_lossy(&tail).into_owned();
    if tail.contains("\"reason\":\"completed\"") {
        Ok(())
    } else {
        Err(format!("turn did not complete: {tail}"))
    }
}

/// Runs the benchmark with the `buddy` binary at `buddy`.
pub async fn run_memory(buddy: &Path, options: &MemoryOptions) -> Result<MemoryReport, BenchError> {
    measure_memory(buddy, options)
        .await
        .map_err(BenchError::Failed)
}

/// The benchmark, its failure in words.
async fn measure_memory(buddy: &Path, options: &MemoryOptions) -> Result<MemoryReport, String> {
    let dir = std::env::temp_dir().join(format!("buddy-memory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("scenarios")).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(dir.join("sandbox")).map_err(|e| e.to_string())?;
    std::fs::write(
        dir.join("scenarios/big_arguments.json"),
        scenario(options.argument_bytes).to_string(),
    )
    .map_err(|e| e.to_string())?;
    let (_mock, mock_url) = spawn(
        buddy,
        &[
            "mock-server",
            "--listen",
            "127.0.0.1:0",
            "--scenarios",
            "scenarios",
        ],
        &dir,
    )?;
    let config = super::load::mock_provider(
        &mock_url,
        "scripted:big_arguments",
        "first_byte_timeout_secs = 600\nidle_timeout_secs = 600\n",
    ) + r#"[policy]
# Room for the arguments in the next request: the whole turn runs, not only its first call.
context_window = 16000000
[skills]
sandbox = "sandbox"
builtin = []
[[skills.command]]
name = "count_bytes"
description = "Counts the bytes of a text."
command = ["wc", "-c"]
semantics = "pure"
[skills.command.parameters]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;
    std::fs::write(dir.join("buddy.toml"), config).map_err(|e| e.to_string())?;
    let measured = options.server.as_deref().unwrap_or(buddy);
    let (server, url) = spawn_serve(measured, &["--db", "memory.db"], &dir)?;
    let pid = server.0.id();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let size = |file: &str| std::fs::metadata(dir.join(file)).map_or(0, |m| m.len());
    let db_size = || size("memory.db");
    let (baseline, db_before) = (rss_kib(pid), db_size());
    let peak = Arc::new(AtomicU64::new(baseline));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (Arc::clone(&peak), Arc::clone(&sampling));
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    buddy_providers::install_crypto_provider();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .map_err(|e| e.to_string())?;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..options.turns {
        let (client, url) = (client.clone(), url.clone());
        tasks.spawn(one_turn(client, url));
    }
    let (mut completed, mut first_error) = (0, None);
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(())) => completed += 1,
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(e.to_string());
            }
        }
    }
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib(pid);
    // The kernel's own high-water mark catches a peak between two samples.
    let peak = peak.load(Ordering::Relaxed).max(status_kib(pid, "VmHWM:"));
    let db_after = db_size();
    let wal = size("memory.db-wal");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    let in_flight = (options.turns * options.argument_bytes) as f64;
    Ok(MemoryReport {
        turns: options.turns,
        argument_mib: options.argument_bytes as f64 / MIB,
        completed,
        first_error,
        rss_baseline_mib: baseline as f64 / 1024.0,
        rss_peak_mib: peak as f64 / 1024.0,
        peak_per_argument_byte: (peak.saturating_sub(baseline) as f64 * 1024.0) / in_flight,
        rss_after_mib: after.saturating_sub(baseline) as f64 / 1024.0,
        db_growth_mib_per_turn: db_after.saturating_sub(db_before) as f64
            / MIB
            / options.turns.max(1) as f64,
        wal_mib: wal as f64 / MIB,
    })
}
