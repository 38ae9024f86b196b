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

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::BenchError;
use tokio::time::Instant;

use super::load::{spawn, spawn_serve};

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
}

/// A running mock and the gateways in front of it, measured in turn at each rate.
#[derive(Clone, Debug)]
pub struct External {
    /// The mock's base URL (`…/v1`).
    pub mock: String,
    /// Each gateway's name and base URL (`…/v1`).
    pub gateways: Vec<(String, String)>,
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
}

/// One rate in one mode: the mock alone, through buddy, and the difference.
#[derive(Clone, Debug, Serialize)]
pub struct RateReport {
    /// The gateway measured (`buddy` when the benchmark started its own).
    pub gateway: String,
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
    /// The gateway's peak resident memory (VmHWM) after this phase, when the benchmark
    /// started it (KiB).
    pub gateway_peak_rss_kib: Option<u64>,
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
        let gateways: Vec<(String, String, Option<u32>)> = external
            .gateways
            .iter()
            .map(|(name, url)| (name.clone(), url.clone(), None))
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
        ) + "[skills]\nbuiltin = []\n[server]\nmax_concurrent_turns_per_key = 1000000\n";
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
    let direct_url = format!("{mock}/chat/completions");
    let mut reports = Vec::new();
    for &stream in &options.modes {
        for &rate in &options.rates {
            let direct = measure(&client, &direct_url, stream, rate, options).await;
            for (name, base, pid) in gateways {
                let url = format!("{base}/chat/completions");
                let through = measure(&client, &url, stream, rate, options).await;
                let held = through.errors == 0
                    && direct.errors == 0
                    && through.achieved_per_sec >= 0.95 * f64::from(rate)
                    && through.p99_ms < 100.0;
                reports.push(RateReport {
                    gateway: name.clone(),
                    stream,
                    rate,
                    added_p50_ms: through.p50_ms - direct.p50_ms,
                    added_p99_ms: through.p99_ms - direct.p99_ms,
                    added_p999_ms: through.p999_ms - direct.p999_ms,
                    direct: direct.clone(),
                    through,
                    held,
                    gateway_peak_rss_kib: pid.map(super::load::peak_rss_kib),
                });
            }
        }
    }
    Ok(reports)
}

/// One phase: a warm-up, then `rate` requests per second for `options.phase`, open loop.
async fn measure(
    client: &reqwest::Client,
    url: &str,
    stream: bool,
    rate: u32,
    options: &GatewayOptions,
) -> Phase {
    let body: Arc<str> = Arc::from(
        serde_json::json!({
            "model": "scripted:plain_chat",
            "messages": [{"role": "user", "content": "Say hello."}],
            "stream": stream,
        })
        .to_string(),
    );
    let _ = open_loop(client, url, &body, rate, options.phase / 5, options.timeout).await;
    open_loop(client, url, &body, rate, options.phase, options.timeout).await
}

async fn open_loop(
    client: &reqwest::Client,
    url: &str,
    body: &Arc<str>,
    rate: u32,
    length: Duration,
    timeout: Duration,
) -> Phase {
    let period = Duration::from_secs_f64(1.0 / f64::from(rate.max(1)));
    let count = (length.as_secs_f64() * f64::from(rate)).round().max(1.0) as usize;
    let url: Arc<str> = Arc::from(url);
    let start = Instant::now() + Duration::from_millis(20);
    let mut tasks = tokio::task::JoinSet::new();
    let mut lags = Vec::with_capacity(count);
    for i in 0..count {
        let at = start + period * u32::try_from(i).unwrap_or(u32::MAX);
        tokio::time::sleep_until(at).await;
        let sent = Instant::now();
        lags.push((sent - at).as_secs_f64() * 1000.0);
        let (client, url, body) = (client.clone(), Arc::clone(&url), Arc::clone(body));
        tasks.spawn(async move {
            let response = client
                .post(&*url)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status();
            let text = response.bytes().await.map_err(|e| e.to_string())?;
            if !status.is_success() {
                return Err(format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&text[..text.len().min(200)])
                ));
            }
            Ok(sent.elapsed().as_secs_f64() * 1000.0)
        });
    }
    let deadline = Instant::now() + timeout;
    let (mut latencies, mut errors, mut first_error) = (Vec::with_capacity(count), 0, None);
    loop {
        let next = tokio::time::timeout_at(deadline, tasks.join_next()).await;
        match next {
            Ok(None) => break,
            Ok(Some(Ok(Ok(ms)))) => latencies.push(ms),
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
