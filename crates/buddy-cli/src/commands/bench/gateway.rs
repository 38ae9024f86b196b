//! `buddy bench gateway`: the latency `buddy serve` adds at fixed request rates.

use std::time::Duration;

use anyhow::Context;
use buddy_bench::gateway::{External, GatewayOptions, RateReport, run_gateway};
use buddy_bench::gateway_api::Api;
use clap::Args;

/// `buddy bench gateway`.
#[derive(Args, Debug)]
pub struct GatewayArgs {
    /// Requests per second (repeatable; each is one phase per target and mode).
    #[arg(long = "rate", short = 'r', value_name = "N", default_values_t = [100, 1000, 2000, 5000])]
    rates: Vec<u32>,
    /// Seconds of each measured phase (a warm-up of a fifth of it comes first).
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    secs: f64,
    /// Only streamed replies, or only whole ones (default: both).
    #[arg(long, value_enum, value_name = "MODE")]
    only: Option<GatewayMode>,
    /// The most buddy may add to the p99 at 1,000 requests/s, in ms (exit 1 when more).
    #[arg(long, value_name = "MS", default_value_t = 1.0)]
    target_ms: f64,
    /// One JSON object per rate and mode instead of the table.
    #[arg(long)]
    json: bool,
    /// A running mock's base URL (`http://…/v1`) to measure against, instead of starting
    /// one; needs `--gateway`.
    #[arg(long, value_name = "URL", requires = "gateways")]
    mock: Option<String>,
    /// A running gateway in front of `--mock`, as NAME=URL (its `http://…/v1`); repeatable,
    /// measured in turn at each rate (none: start `buddy serve` and measure it).
    #[arg(long = "gateway", value_name = "NAME=URL", requires = "mock", value_parser = name_and_url)]
    gateways: Vec<(String, String)>,
    /// A gateway's process id, as NAME=PID (repeatable): its CPU time over each phase and
    /// its peak memory, its descendants counted with it.
    #[arg(long = "gateway-pid", value_name = "NAME=PID", requires = "gateways", value_parser = name_and_pid)]
    gateway_pids: Vec<(String, u32)>,
    /// The API sent to the gateways: `chat` (Chat Completions, the default) or `messages`
    /// (Anthropic's Messages; the mock is sent the equivalent Chat Completions request,
    /// so added latency is over the mock's Chat Completions answer). The 1 ms target
    /// (`--target-ms`) is checked on `chat` only.
    #[arg(long, value_enum, value_name = "API", default_value = "chat")]
    api: GatewayApi,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum GatewayApi {
    /// `POST …/chat/completions`.
    Chat,
    /// `POST …/messages`.
    Messages,
}

/// `NAME=PID`.
fn name_and_pid(text: &str) -> Result<(String, u32), String> {
    match text.split_once('=').map(|(name, pid)| (name, pid.parse())) {
        Some((name, Ok(pid))) if !name.is_empty() => Ok((name.to_owned(), pid)),
        _ => Err(format!("`{text}` is not NAME=PID")),
    }
}

/// `NAME=URL` split at the first `=`.
fn name_and_url(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, url)) if !name.is_empty() && url.starts_with("http") => {
            Ok((name.to_owned(), url.trim_end_matches('/').to_owned()))
        }
        _ => Err(format!("`{text}` is not NAME=http://…")),
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum GatewayMode {
    Stream,
    Whole,
}

/// Runs the benchmark and prints its report; exit code 1 when a target is missed.
pub async fn run(args: GatewayArgs) -> anyhow::Result<u8> {
    let buddy = std::env::current_exe().context("cannot find the buddy binary")?;
    let options = GatewayOptions {
        rates: args.rates.iter().copied().filter(|r| *r > 0).collect(),
        phase: Duration::from_secs_f64(args.secs.clamp(0.5, 600.0)),
        modes: match args.only {
            Some(GatewayMode::Stream) => vec![true],
            Some(GatewayMode::Whole) => vec![false],
            None => vec![false, true],
        },
        timeout: Duration::from_secs(30),
        external: args.mock.map(|mock| External {
            mock: mock.trim_end_matches('/').to_owned(),
            gateways: args.gateways,
            pids: args.gateway_pids,
        }),
        api: match args.api {
            GatewayApi::Chat => Api::ChatCompletions,
            GatewayApi::Messages => Api::Messages,
        },
    };
    let reports = run_gateway(&buddy, &options)
        .await
        .map_err(anyhow::Error::msg)?;
    let missed = reports.iter().any(|r| {
        r.gateway == "buddy"
            && r.api == Api::ChatCompletions
            && r.rate == 1000
            && (!r.held || r.added_p99_ms > args.target_ms)
    });
    if args.json {
        for r in &reports {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(u8::from(missed));
    }
    print_table(&reports);
    let mut names: Vec<&str> = Vec::new();
    for r in &reports {
        if !names.contains(&r.gateway.as_str()) {
            names.push(&r.gateway);
        }
    }
    for name in names {
        for stream in [false, true] {
            let mode = if stream { "streamed" } else { "whole" };
            let runs = reports
                .iter()
                .filter(|r| r.stream == stream && r.gateway == name);
            if let Some(broke) = runs.clone().find(|r| !r.held) {
                println!(
                    "{name}, {mode}: held up to the rate before {} requests/s, which did not hold",
                    broke.rate
                );
            } else if let Some(top) = runs.map(|r| r.rate).max() {
                println!("{name}, {mode}: held at every rate measured (up to {top} requests/s)");
            }
        }
    }
    Ok(u8::from(missed))
}

/// One line per gateway, mode and rate.
fn print_table(reports: &[RateReport]) {
    if reports.iter().any(|r| r.api == Api::Messages) {
        println!(
            "/v1/messages through each gateway; the mock is sent the equivalent /v1/chat/completions"
        );
    }
    println!(
        "{:>8} {:>6} {:>6} {:>8} {:>6} | {:>24} | {:>24} | {:>24} | {:>5} {:>9} {:>8} | {:<23}",
        "gateway",
        "mode",
        "rate",
        "achieved",
        "errors",
        "mock p50/p99/p999 ms",
        "gateway p50/p99/p999 ms",
        "added p50/p99/p999 ms",
        "held",
        "peak RSS",
        "CPU/req",
        "TTFT mock/gw p50/p99 ms"
    );
    for r in reports {
        println!(
            "{:>8} {:>6} {:>6} {:>8.0} {:>6} | {:>7.2} {:>7.2} {:>8.2} | {:>7.2} {:>7.2} {:>8.2} | {:>7.2} {:>7.2} {:>8.2} | {:>5} {:>9} {:>8} | {:<23}",
            r.gateway,
            if r.stream { "stream" } else { "whole" },
            r.rate,
            r.through.achieved_per_sec,
            r.through.errors + r.direct.errors,
            r.direct.p50_ms,
            r.direct.p99_ms,
            r.direct.p999_ms,
            r.through.p50_ms,
            r.through.p99_ms,
            r.through.p999_ms,
            r.added_p50_ms,
            r.added_p99_ms,
            r.added_p999_ms,
            if r.held { "yes" } else { "NO" },
            r.gateway_peak_rss_kib.map_or_else(
                || "-".to_owned(),
                |kib| format!("{:.1} MiB", kib as f64 / 1024.0)
            ),
            r.gateway_cpu_ms_per_request
                .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.2} ms")),
            ttft(r),
        );
        if let Some(e) = r
            .through
            .first_error
            .as_ref()
            .or(r.direct.first_error.as_ref())
        {
            println!("       first error: {e}");
        }
    }
}

/// The time to first token of a streamed phase, the mock's then the gateway's.
fn ttft(r: &RateReport) -> String {
    let pair = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!("{a:.2}/{b:.2}"),
        _ => "-".to_owned(),
    };
    format!(
        "{}  {}",
        pair(r.direct.ttft_p50_ms, r.direct.ttft_p99_ms),
        pair(r.through.ttft_p50_ms, r.through.ttft_p99_ms)
    )
}
