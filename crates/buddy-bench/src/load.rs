//! The load benchmark: N concurrent streaming chats against a real `buddy serve`
//! process backed by a `buddy mock-server` process, all on 127.0.0.1. Each chat is one
//! turn of three tool rounds (`scenarios/three_rounds.json`). Separate processes keep
//! the server's memory and sockets its own, so its RSS is measured alone. With a
//! PostgreSQL store, several `buddy serve` instances share the load (and the RSS
//! figures are their sum).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::BenchError;

/// What to run.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub conversations: usize,
    /// Latency of every model call at the mock (the time conversations spend waiting).
    pub latency_ms: u64,
    /// Bound on the whole run.
    pub timeout: Duration,
    pub scenarios: PathBuf,
    /// `buddy serve` processes; the chats are spread over them in turn.
    pub instances: usize,
    /// A `postgres://` URL every instance shares; `None`: one SQLite file (one instance).
    pub store: Option<String>,
    /// Chats run (all at once) before the measured ones and not counted: a server's
    /// steady state, with its database connections open and its statements prepared.
    pub warmup: usize,
}

/// What happened.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    pub instances: usize,
    pub store: &'static str,
    pub warmup: usize,
    pub conversations: usize,
    pub completed: usize,
    pub errors: usize,
    pub first_error: Option<String>,
    pub wall_secs: f64,
    pub turns_per_sec: f64,
    pub first_event_p50_ms: f64,
    pub first_event_p99_ms: f64,
    pub done_p50_ms: f64,
    pub done_p99_ms: f64,
    pub server_rss_baseline_kib: u64,
    pub server_rss_peak_kib: u64,
    pub server_kib_per_conversation: f64,
}

/// A child process killed when dropped.
pub(crate) struct Proc(pub(crate) Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `buddy ARGS…` and reads the `http://…` address it prints on stderr.
pub(crate) fn spawn(buddy: &Path, args: &[&str], cwd: &Path) -> Result<(Proc, String), String> {
    let mut child = Command::new(buddy)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", buddy.display()))?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let mut reader = BufReader::new(stderr);
    let mut line = String::new();
    reader.read_line(&mut line).map_err(|e| e.to_string())?;
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .ok_or_else(|| format!("`buddy {}` said: {line}", args.join(" ")))?
        .to_owned();
    std::thread::spawn(move || for _ in reader.lines() {});
    Ok((Proc(child), url))
}

/// The start of a benchmark's `buddy.toml`: the mock at `base_url` as the default
/// provider serving `model`, no retries, then `http` (more `[providers.mock.http]` lines).
pub(crate) fn mock_provider(base_url: &str, model: &str, http: &str) -> String {
    format!(
        "default_provider = \"mock\"\n[providers.mock]\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodel = \"{model}\"\n[providers.mock.http]\nmax_retries = 0\n{http}"
    )
}

/// Starts `buddy --config buddy.toml serve` on a free loopback port in `dir`, with its
/// store given by `store` (`["--db", FILE]` or `["--store", URL]`); returns its address.
pub(crate) fn spawn_serve(
    buddy: &Path,
    store: &[&str],
    dir: &Path,
) -> Result<(Proc, String), String> {
    let mut args = vec!["--config", "buddy.toml", "serve", "--listen", "127.0.0.1:0"];
    args.extend_from_slice(store);
    spawn(buddy, &args, dir)
}

/// Peak resident memory of a process (VmHWM) in KiB (Linux).
pub(crate) fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:")
}

/// Resident memory of a process in KiB (Linux).
pub(crate) fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A `/proc/PID/status` figure in KiB (`VmRSS:`, `VmHWM:` — the peak…); 0 elsewhere.
pub(crate) fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// A fresh directory with the sandbox and buddy.toml the servers read, and the mock
/// model server they call (it runs until the returned process is dropped).
fn prepare(buddy: &Path, options: &LoadOptions) -> Result<(PathBuf, Proc), String> {
    let dir = std::env::temp_dir().join(format!(
        "buddy-load-{}-{}",
        std::process::id(),
        options.conversations
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sandbox")).map_err(|e| e.to_string())?;
    std::fs::write(
        dir.join("sandbox/notes.md"),
        "buddy keeps every turn short.\n",
    )
    .map_err(|e| e.to_string())?;
    let scenarios = options.scenarios.display().to_string();
    let latency = options.latency_ms.to_string();
    let (mock, mock_url) = spawn(
        buddy,
        &[
            "mock-server",
            "--listen",
            "127.0.0.1:0",
            "--latency-ms",
            &latency,
            "--scenarios",
            &scenarios,
        ],
        &dir,
    )?;
    let config = mock_provider(
        &mock_url,
        "scripted:three_rounds",
        "http2_prior_knowledge = true\nfirst_byte_timeout_secs = 600\nidle_timeout_secs = 600\n",
    ) + r#"[skills]
sandbox = "sandbox"
[server]
max_concurrent_turns_per_key = 1000000
# One key sends every chat: its cap of model calls in flight (16) would queue all but 16.
max_model_calls_in_flight_per_key = 1000000
# Every chat comes from 127.0.0.1: the per-address cap would refuse all but 256.
max_connections_per_address = 1000000
"#;
    std::fs::write(dir.join("buddy.toml"), config).map_err(|e| e.to_string())?;
    Ok((dir, mock))
}

/// Runs one load test with the `buddy` binary at `buddy`.
pub async fn run_load(buddy: &Path, options: &LoadOptions) -> Result<LoadReport, BenchError> {
    measure_load(buddy, options)
        .await
        .map_err(BenchError::Failed)
}

/// The benchmark, its failure in words.
async fn measure_load(buddy: &Path, options: &LoadOptions) -> Result<LoadReport, String> {
    let (dir, _mock) = prepare(buddy, options)?;
    let instances = match &options.store {
        Some(_) => options.instances.max(1),
        None if options.instances > 1 => {
            return Err("several instances share a store: give --store postgres://…".into());
        }
        None => 1,
    };
    let mut servers = Vec::new();
    let mut urls = Vec::new();
    for _ in 0..instances {
        let store = match &options.store {
            Some(store) => ["--store", store.as_str()],
            None => ["--db", "load.db"],
        };
        let (server, url) = spawn_serve(buddy, &store, &dir)?;
        servers.push(server);
        urls.push(url);
    }
    let pids: Vec<u32> = servers.iter().map(|s| s.0.id()).collect();
    let rss = move || pids.iter().map(|pid| rss_kib(*pid)).sum::<u64>();
    tokio::time::sleep(Duration::from_millis(200)).await;
    buddy_providers::install_crypto_provider();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(options.timeout)
        .build()
        .map_err(|e| e.to_string())?;
    if options.warmup > 0 {
        let warm = chats(&client, &urls, options.warmup).await;
        if let Some(e) = warm.first_error {
            return Err(format!(
                "{} of {} warm-up chats failed: {e}",
                warm.errors, options.warmup
            ));
        }
    }
    let baseline = rss();
    let peak = Arc::new(AtomicU64::new(baseline));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling, rss) = (Arc::clone(&peak), Arc::clone(&sampling), rss.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                peak.fetch_max(rss(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let started = Instant::now();
    let Chats {
        mut firsts,
        mut dones,
        errors,
        first_error,
    } = chats(&client, &urls, options.conversations).await;
    let wall = started.elapsed().as_secs_f64();
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.await;
    drop(servers);
    let _ = std::fs::remove_dir_all(&dir);
    firsts.sort_by(f64::total_cmp);
    dones.sort_by(f64::total_cmp);
    let peak = peak.load(Ordering::Relaxed);
    Ok(LoadReport {
        instances,
        store: if options.store.is_some() {
            "postgres"
        } else {
            "sqlite"
        },
        warmup: options.warmup,
        conversations: options.conversations,
        completed: dones.len(),
        errors,
        first_error,
        wall_secs: wall,
        turns_per_sec: dones.len() as f64 / wall,
        first_event_p50_ms: percentile(&firsts, 50.0),
        first_event_p99_ms: percentile(&firsts, 99.0),
        done_p50_ms: percentile(&dones, 50.0),
        done_p99_ms: percentile(&dones, 99.0),
        server_rss_baseline_kib: baseline,
        server_rss_peak_kib: peak,
        server_kib_per_conversation: peak.saturating_sub(baseline) as f64
            / options.conversations.max(1) as f64,
    })
}

/// What a burst of chats did: time to the first event and to the end of each one that
/// completed (ms), and the failures.
#[derive(Default)]
struct Chats {
    firsts: Vec<f64>,
    dones: Vec<f64>,
    errors: usize,
    first_error: Option<String>,
}

/// Runs `n` chats at once, spread over `urls` in turn, each to its end.
async fn chats(client: &reqwest::Client, urls: &[String], n: usize) -> Chats {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let (client, url) = (client.clone(), urls[i % urls.len()].clone());
        tasks.spawn(async move {
            let begin = Instant::now();
            let mut response = client
                .post(format!("{url}/v1/chat"))
                .json(&serde_json::json!({"message": "Check the time, the workspace and the mentions of buddy."}))
                .send()
                .await
                .map_err(|e| format!("request: {e}"))?;
            if !response.status().is_success() {
                return Err(format!("HTTP {}", response.status()));
            }
            let mut first = None;
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| format!("stream: {e}"))? {
                first.get_or_insert_with(|| begin.elapsed());
                body.extend_from_slice(&chunk);
            }
            let body = String::from_utf8_lossy(&body);
            if !body.contains("event: done") || !body.contains("\"reason\":\"completed\"") {
                let tail: String = body.chars().rev().take(300).collect::<Vec<_>>().into_iter().rev().collect();
                return Err(format!("turn did not complete: {tail}"));
            }
            Ok((first.unwrap_or_default(), begin.elapsed()))
        });
    }
    let mut out = Chats::default();
    while let Some(joined) = tasks.join_next().await {
        let failed = match joined {
            Ok(Ok((first, done))) => {
                out.firsts.push(first.as_secs_f64() * 1000.0);
                out.dones.push(done.as_secs_f64() * 1000.0);
                continue;
            }
            Ok(Err(e)) => e,
            Err(e) => e.to_string(),
        };
        out.errors += 1;
        out.first_error.get_or_insert(failed);
    }
    out
}
