//! The gateway benchmark: the latency `buddy serve` adds to a chat completion it passes
//! to a model, measured open-loop. A `buddy mock-server` process answers at once; a
//! `buddy serve` process (no skills, SQLite store) is in front of it. At each fixed
//! request rate the same requests go, in the same run, first straight to the mock, then
//! through buddy; requests are sent on a schedule whatever the answers do (open loop),
//! so queueing shows as latency instead of as a lower rate. Added latency at a quantile
//! is buddy's quantile less the mock's.
//!
//! Given a running mock and gateways already in front of it (`--mock`, `--gateway`), the
//! same schedule goes to each of them in turn instead (scripts/bench-gateway-litellm.sh
//! puts LiteLLM's proxy beside buddy this way).
//!
//! With `api: Messages` the gateways are sent Anthropic's Messages requests
//! (`POST …/messages`) instead; the mock speaks only Chat Completions, so a gateway's
//! added latency is then over the mock's answer to the equivalent Chat Completions
//! request (gateway_api.rs). Streamed replies also give the time to the first token.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::BenchError;
use tokio::time::Instant;

use super::gateway_api::{Api, FirstToken};
use super::load::{spawn, spawn_serve};
use super::proc_tree;

/// What to run.
#[derive(Clone, Debug)]
pub struct GatewayOptions {
    /// Requests per second, each one phase per target and mode.
    pub rates: Vec<u32>,
    /// Length of each measured phase (after a warm-up of a fifth of it).
    pub phase: Duration,
    /// Streamed (`stream: true`) and/or whole replies.
    pub modes: Vec<bool>,
    /// A request unanswered after this long is an error.
    pub timeout: Duration,
    /// Gateways already running in front of `mock`, by name and base URL (`…/v1`); when
    /// empty, the benchmark starts its own mock and `buddy serve`.
    pub external: Option<External>,
    /// The API the gateways are measured on (the mock always answers Chat Completions).
    pub api: Api,
}

/// A running mock and the gateways in front of it, measured in turn at each rate.
#[derive(Clone, Debug)]
pub struct External {
    /// The mock's base URL (`…/v1`).
    pub mock: String,
    /// Each gateway's name and base URL (`…/v1`).
    pub gateways: Vec<(String, String)>,
    /// Process ids of gateways by name: each one's CPU time and peak memory (with its
    /// descendants) are read per phase.
    pub pids: Vec<(String, u32)>,
}

/// One target at one rate.
#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    pub sent: usize,
    pub ok: usize,
    pub errors: usize,
    pub first_error: Option<String>,
    /// Answers per second over the phase.
    pub achieved_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    /// How late the generator sent its 99th-percentile request (its own lag).
    pub send_lag_p99_ms: f64,
    /// Time to the first token of content of streamed replies (Chat Completions: the first
    /// non-empty `delta.content`; Messages: the first `content_block_delta`), p50 and p99.
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
}

/// One rate in one mode: the mock alone, through buddy, and the difference.
#[derive(Clone, Debug, Serialize)]
pub struct RateReport {
    /// The gateway measured (`buddy` when the benchmark started its own).
    pub gateway: String,
    /// The API sent to the gateway (the mock is sent Chat Completions).
    pub api: Api,
    pub stream: bool,
    pub rate: u32,
    pub direct: Phase,
    /// Through the gateway.
    pub through: Phase,
    pub added_p50_ms: f64,
    pub added_p99_ms: f64,
    pub added_p999_ms: f64,
    /// No errors, at least 95 % of the rate answered, and the gateway's p99 under 100 ms.
    pub held: bool,
    /// The gateway's peak resident memory (VmHWM, summed over its processes) after this
    /// phase, when its process id is known (KiB).
    pub gateway_peak_rss_kib: Option<u64>,
    /// CPU time (user + system) the gateway's processes used over the measured phase,
    /// from its first request until its last answer, when its process id is known (ms).
    pub gateway_cpu_ms: Option<f64>,
    /// That CPU time per answered request (ms).
    pub gateway_cpu_ms_per_request: Option<f64>,
}

/// Starts the mock and `buddy serve` (or uses the running ones `options.external`
/// names), then measures every rate in every mode.
pub async fn run_gateway(
    buddy: &Path,
    options: &GatewayOptions,
) -> Result<Vec<RateReport>, BenchError> {
    measure_gateway(buddy, options)
        .await
        .map_err(BenchError::Failed)
}

/// The benchmark, its failure in words.
async fn measure_gateway(
    buddy: &Path,
    options: &GatewayOptions,
) -> Result<Vec<RateReport>, String> {
    buddy_providers::install_crypto_provider();
    if let Some(external) = &options.external {
        let pid = |name: &str| {
            let mut pids = external.pids.iter();
            pids.find(|(n, _)| n == name).map(|(_, pid)| *pid)
        };
        let gateways: Vec<(String, String, Option<u32>)> = external
            .gateways
            .iter()
            .map(|(name, url)| (name.clone(), url.clone(), pid(name)))
            .collect();
        return measure_all(&external.mock, &gateways, options).await;
    }
    let dir = std::env::temp_dir().join(format!("buddy-gateway-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let result = async {
        let (_mock, mock) = spawn(buddy, &["mock-server", "--listen", "127.0.0.1:0"], &dir)?;
        let config = super::load::mock_provider(
            &mock,
            "scripted:plain_chat",
            "http2_prior_knowledge = true\n",
        ) + "[skills]\nbuiltin = []\n[server]\nmax_concurrent_turns_per_key = 1000000\nmax_model_calls_in_flight_per_key = 1000000\n";
        std::fs::write(dir.join("buddy.toml"), config).map_err(|e| e.to_string())?;
        let (server_proc, server) = spawn_serve(buddy, &["--db", "gateway.db"], &dir)?;
        let gateways = [(
            "buddy".to_owned(),
            format!("{server}/v1"),
            Some(server_proc.0.id()),
        )];
        measure_all(&mock, &gateways, options).await
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Every mode and rate: the mock alone, then each gateway (name, base URL, process id
/// when known) in turn.
async fn measure_all(
    mock: &str,
    gateways: &[(String, String, Option<u32>)],
    options: &GatewayOptions,
) -> Result<Vec<RateReport>, String> {
    let client = reqwest::Client::builder()
        .timeout(options.timeout)
        .pool_max_idle_per_host(4096)
        .build()
        .map_err(|e| e.to_string())?;
    let direct_url = format!("{mock}{}", Api::ChatCompletions.path());
    let mut reports = Vec::new();
    for &stream in &options.modes {
        for &rate in &options.rates {
            let body = options.api.direct_body(stream);
            let to_mock = Target::new(&direct_url, Api::ChatCompletions, body, None);
            let (direct, _) = measure(&client, &to_mock, stream, rate, options).await;
            for (name, base, pid) in gateways {
                let url = format!("{base}{}", options.api.path());
                let body = options.api.body(stream);
                let target = Target::new(&url, options.api, body, *pid);
                let (through, cpu_ms) = measure(&client, &target, stream, rate, options).await;
                let held = through.errors == 0
                    && direct.errors == 0
                    && through.achieved_per_sec >= 0.95 * f64::from(rate)
                    && through.p99_ms < 100.0;
                let answered = through.ok.max(1) as f64;
                reports.push(RateReport {
                    gateway: name.clone(),
                    api: options.api,
                    stream,
                    rate,
                    added_p50_ms: through.p50_ms - direct.p50_ms,
                    added_p99_ms: through.p99_ms - direct.p99_ms,
                    added_p999_ms: through.p999_ms - direct.p999_ms,
                    direct: direct.clone(),
                    through,
                    held,
                    gateway_peak_rss_kib: pid.map(proc_tree::peak_rss_kib),
                    gateway_cpu_ms: cpu_ms,
                    gateway_cpu_ms_per_request: cpu_ms.map(|cpu| cpu / answered),
                });
            }
        }
    }
    Ok(reports)
}

/// Where one phase's requests go: the URL, the API (how to read a stream's first token),
/// the body and the process id whose CPU time is read over the phase.
struct Target {
    url: Arc<str>,
    api: Api,
    body: Arc<str>,
    pid: Option<u32>,
}

impl Target {
    fn new(url: &str, api: Api, body: serde_json::Value, pid: Option<u32>) -> Self {
        Target {
            url: Arc::from(url),
            api,
            body: Arc::from(body.to_string()),
            pid,
        }
    }
}

/// One phase: a warm-up, then `rate` requests per second for `options.phase`, open loop;
/// with the CPU time the target's process used over the measured part when its id is
/// known.
async fn measure(
    client: &reqwest::Client,
    target: &Target,
    stream: bool,
    rate: u32,
    options: &GatewayOptions,
) -> (Phase, Option<f64>) {
    let timeout = options.timeout;
    let _ = open_loop(client, target, stream, rate, options.phase / 5, timeout).await;
    let before = target.pid.map(proc_tree::cpu_ms);
    let phase = open_loop(client, target, stream, rate, options.phase, timeout).await;
    let cpu = target.pid.map(proc_tree::cpu_ms);
    (phase, before.zip(cpu).map(|(before, after)| after - before))
}

/// One request: its latency to the last byte and, streamed, to the first token (ms).
async fn request(
    client: reqwest::Client,
    target: (Arc<str>, Api, Arc<str>),
    stream: bool,
    sent: Instant,
) -> Result<(f64, Option<f64>), String> {
    let (url, api, body) = target;
    let mut request = client
        .post(&*url)
        .header("content-type", "application/json");
    for (name, value) in api.headers() {
        request = request.header(*name, *value);
    }
    let mut response = request
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let (mut reader, mut first, mut text) = (FirstToken::new(api), None, Vec::new());
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if stream && first.is_none() && status.is_success() && reader.feed(&chunk) {
            first = Some(sent.elapsed().as_secs_f64() * 1000.0);
        }
        if !status.is_success() && text.len() < 200 {
            text.extend_from_slice(&chunk);
        }
    }
    if !status.is_success() {
        return Err(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&text[..text.len().min(200)])
        ));
    }
    if stream && first.is_none() {
        return Err("a streamed reply with no token of content".into());
    }
    Ok((sent.elapsed().as_secs_f64() * 1000.0, first))
}

async fn open_loop(
    client: &reqwest::Client,
    target: &Target,
    stream: bool,
    rate: u32,
    length: Duration,
    timeout: Duration,
) -> Phase {
    let period = Duration::from_secs_f64(1.0 / f64::from(rate.max(1)));
    let count = (length.as_secs_f64() * f64::from(rate)).round().max(1.0) as usize;
    let start = Instant::now() + Duration::from_millis(20);
    let mut tasks = tokio::task::JoinSet::new();
    let mut lags = Vec::with_capacity(count);
    for i in 0..count {
        let at = start + period * u32::try_from(i).unwrap_or(u32::MAX);
        tokio::time::sleep_until(at).await;
        let sent = Instant::now();
        lags.push((sent - at).as_secs_f64() * 1000.0);
        let to = (
            Arc::clone(&target.url),
            target.api,
            Arc::clone(&target.body),
        );
        tasks.spawn(request(client.clone(), to, stream, sent));
    }
    let deadline = Instant::now() + timeout;
    let (mut latencies, mut errors, mut first_error) = (Vec::with_capacity(count), 0, None);
    let mut firsts = Vec::new();
    loop {
        let next = tokio::time::timeout_at(deadline, tasks.join_next()).await;
        match next {
            Ok(None) => break,
            Ok(Some(Ok(Ok((ms, first))))) => {
                latencies.push(ms);
                firsts.extend(first);
            }
            Ok(Some(Ok(Err(e)))) => {
                errors += 1;
                first_error.get_or_insert(e);
            }
            Ok(Some(Err(e))) => {
                errors += 1;
                first_error.get_or_insert(e.to_string());
            }
            Err(_) => {
                errors += tasks.len();
                first_error.get_or_insert_with(|| "no answer before the timeout".into());
                tasks.abort_all();
                break;
            }
        }
    }
    let wall = (Instant::now() - start)
        .as_secs_f64()
        .max(length.as_secs_f64());
    latencies.sort_by(f64::total_cmp);
    lags.sort_by(f64::total_cmp);
    firsts.sort_by(f64::total_cmp);
    let ttft = |q| (!firsts.is_empty()).then(|| quantile(&firsts, q));
    Phase {
        sent: count,
        ok: latencies.len(),
        errors,
        first_error,
        achieved_per_sec: latencies.len() as f64 / wall,
        p50_ms: quantile(&latencies, 0.50),
        p99_ms: quantile(&latencies, 0.99),
        p999_ms: quantile(&latencies, 0.999),
        send_lag_p99_ms: quantile(&lags, 0.99),
        ttft_p50_ms: ttft(0.50),
        ttft_p99_ms: ttft(0.99),
    }
}

/// The `q` quantile of sorted values (nearest rank); 0 when there are none.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 500.0);
        assert_eq!(quantile(&v, 0.99), 990.0);
        assert_eq!(quantile(&v, 0.999), 999.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
        assert_eq!(quantile(&[3.0], 0.999), 3.0);
    }
}
