//! The memory benchmark: N turns at once against a real `buddy serve` process (or one
//! through `buddy run`), each with a model reply whose tool call carries a large argument
//! (streamed in 64 KiB pieces by `buddy mock-server`, as a real server does), to a
//! command skill that counts the bytes; the turn then goes on by one of the paths of
//! `memory_path` (answered, overflowing the window, a failing tool, invalid arguments, a
//! refused request). Reports the peak resident memory over the baseline as a multiple of
//! the arguments in flight, what stays resident once the turns are over, and how much
//! the database grew per turn.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::BenchError;
use crate::memory_path::MemoryPath;
use serde_json::json;

use super::load::{rss_kib, spawn_serve, status_kib};
use crate::memory_run::measure_run;
use crate::memory_setup::prepare;

/// What to run.
#[derive(Clone, Debug)]
pub struct MemoryOptions {
    /// Turns at once (`buddy run` always runs one).
    pub turns: usize,
    /// Size of each reply's tool-call argument, in bytes.
    pub argument_bytes: usize,
    /// How the turns go on after the large call.
    pub path: MemoryPath,
    /// Which process carries the turns: `buddy serve` or `buddy run`.
    pub via: MemoryVia,
    /// The `buddy` binary measured (another build, for a before/after);
    /// `None`: the one running the benchmark.
    pub server: Option<std::path::PathBuf>,
}

/// Which process the benchmark measures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum MemoryVia {
    /// `buddy serve`, its turns started on `POST /v1/chat` and their streams read.
    #[default]
    Serve,
    /// `buddy run`, one turn, its output read.
    Run,
}

/// What happened.
#[derive(Clone, Debug, Serialize)]
pub struct MemoryReport {
    pub path: MemoryPath,
    pub via: MemoryVia,
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

/// One turn against the server at `url`, its stream read as it comes; `Ok` when it
/// ended with `reason`.
async fn one_turn(client: reqwest::Client, url: String, reason: &str) -> Result<(), String> {
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
    if tail.contains(&format!("\"reason\":\"{reason}\"")) {
        Ok(())
    } else {
        Err(format!("turn did not end {reason}: {tail}"))
    }
}

/// Runs the benchmark with the `buddy` binary at `buddy`.
pub async fn run_memory(buddy: &Path, options: &MemoryOptions) -> Result<MemoryReport, BenchError> {
    let measured = match options.via {
        MemoryVia::Serve => measure_memory(buddy, options).await,
        MemoryVia::Run => run_report(buddy, options).await,
    };
    measured.map_err(BenchError::Failed)
}

/// The benchmark, its failure in words.
async fn measure_memory(buddy: &Path, options: &MemoryOptions) -> Result<MemoryReport, String> {
    let bench = prepare(buddy, options.path, options.argument_bytes, "serve")?;
    let dir = bench.dir.clone();
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
        let reason = options.path.expected_reason();
        tasks.spawn(async move { one_turn(client, url, reason).await });
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
    drop(bench);
    let in_flight = (options.turns * options.argument_bytes) as f64;
    Ok(MemoryReport {
        path: options.path,
        via: MemoryVia::Serve,
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

/// The report of one turn through `buddy run` (see `memory_run`).
async fn run_report(buddy: &Path, options: &MemoryOptions) -> Result<MemoryReport, String> {
    let measured = options.server.as_deref().unwrap_or(buddy);
    let run = measure_run(buddy, measured, options.path, options.argument_bytes).await?;
    let mib = |kib: u64| kib as f64 / 1024.0;
    Ok(MemoryReport {
        path: options.path,
        via: MemoryVia::Run,
        turns: 1,
        argument_mib: options.argument_bytes as f64 / MIB,
        completed: usize::from(run.first_error.is_none()),
        first_error: run.first_error,
        rss_baseline_mib: mib(run.baseline_kib),
        rss_peak_mib: mib(run.peak_kib),
        peak_per_argument_byte: run.peak_kib.saturating_sub(run.baseline_kib) as f64 * 1024.0
            / options.argument_bytes.max(1) as f64,
        rss_after_mib: 0.0,
        db_growth_mib_per_turn: 0.0,
        wal_mib: 0.0,
    })
}
