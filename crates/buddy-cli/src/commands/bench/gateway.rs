//! `buddy bench gateway`: the latency `buddy serve` adds at fixed request rates.

use std::time::Duration;

use crate::bench::gateway::{GatewayOptions, run_gateway};
use anyhow::Context;
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
    };
    let reports = run_gateway(&buddy, &options)
        .await
        .map_err(anyhow::Error::msg)?;
    let missed = reports
        .iter()
        .any(|r| r.rate == 1000 && (!r.held || r.added_p99_ms > args.target_ms));
    if args.json {
        for r in &reports {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(u8::from(missed));
    }
    println!(
        "{:>6} {:>6} {:>8} {:>6} | {:>24} | {:>24} | {:>24} | {:>5}",
        "mode",
        "rate",
        "achieved",
        "errors",
        "mock p50/p99/p999 ms",
        "buddy p50/p99/p999 ms",
        "added p50/p99/p999 ms",
        "held"
    );
    for r in &reports {
        println!(
            "{:>6} {:>6} {:>8.0} {:>6} | {:>7.2} {:>7.2} {:>8.2} | {:>7.2} {:>7.2} {:>8.2} | {:>7.2} {:>7.2} {:>8.2} | {:>5}",
            if r.stream { "stream" } else { "whole" },
            r.rate,
            r.buddy.achieved_per_sec,
            r.buddy.errors + r.direct.errors,
            r.direct.p50_ms,
            r.direct.p99_ms,
            r.direct.p999_ms,
            r.buddy.p50_ms,
            r.buddy.p99_ms,
            r.buddy.p999_ms,
            r.added_p50_ms,
            r.added_p99_ms,
            r.added_p999_ms,
            if r.held { "yes" } else { "NO" },
        );
        if let Some(e) = r
            .buddy
            .first_error
            .as_ref()
            .or(r.direct.first_error.as_ref())
        {
            println!("       first error: {e}");
        }
    }
    for stream in [false, true] {
        let mode = if stream { "streamed" } else { "whole" };
        let runs = reports.iter().filter(|r| r.stream == stream);
        if let Some(broke) = runs.clone().find(|r| !r.held) {
            println!(
                "{mode}: held up to the rate before {} requests/s, which did not hold",
                broke.rate
            );
        } else if let Some(top) = runs.map(|r| r.rate).max() {
            println!("{mode}: held at every rate measured (up to {top} requests/s)");
        }
    }
    Ok(u8::from(missed))
}
