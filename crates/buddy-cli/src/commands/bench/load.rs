//! `buddy bench load`: N concurrent chats against `buddy serve`, as a table or JSON.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use buddy_bench::load::{LoadOptions, run_load};
use buddy_scripted::run::scenarios_dir;
use clap::Args;

/// `buddy bench load`.
#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Concurrent conversations (repeatable: each is one run).
    #[arg(long = "conversations", short = 'n', value_name = "N", default_values_t = [100, 1000])]
    conversations: Vec<usize>,
    /// Latency of every model call at the mock, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    latency_ms: u64,
    /// Bound on each run, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    timeout_secs: u64,
    /// Directory of scenarios for the mock (default: ./scenarios, else the built-in ones).
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
    /// `buddy serve` instances sharing the load (more than one needs --store).
    #[arg(long, value_name = "N", default_value_t = 1)]
    instances: usize,
    /// A postgres:// URL the instances share (default: one SQLite file).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Chats run first and not measured (the servers' connections and caches warm up).
    #[arg(long, value_name = "N", default_value_t = 0)]
    warmup: usize,
    /// One JSON object per run instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark and prints its report; exit code 1 when a target is missed.
pub async fn run(args: LoadArgs) -> anyhow::Result<u8> {
    let buddy = std::env::current_exe().context("cannot find the buddy binary")?;
    let scenarios = std::fs::canonicalize(scenarios_dir(args.scenarios))?;
    if !args.json {
        println!(
            "{:>6} {:>6} {:>6} {:>8} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9}",
            "conv",
            "done",
            "errors",
            "turns/s",
            "first p50",
            "first p99",
            "done p50",
            "done p99",
            "rss base",
            "rss peak",
            "KiB/conv"
        );
    }
    let mut failed = false;
    for n in args.conversations {
        let options = LoadOptions {
            conversations: n,
            latency_ms: args.latency_ms,
            timeout: Duration::from_secs(args.timeout_secs),
            scenarios: scenarios.clone(),
            instances: args.instances,
            store: args.store.clone(),
            warmup: args.warmup,
        };
        let r = run_load(&buddy, &options)
            .await
            .map_err(anyhow::Error::msg)?;
        failed |= r.errors > 0;
        if args.json {
            println!("{}", serde_json::to_string(&r)?);
            continue;
        }
        println!(
            "{:>6} {:>6} {:>6} {:>8.0} {:>7.1}ms {:>7.1}ms {:>7.0}ms {:>7.0}ms {:>7}KiB {:>7}KiB {:>9.1}",
            r.conversations,
            r.completed,
            r.errors,
            r.turns_per_sec,
            r.first_event_p50_ms,
            r.first_event_p99_ms,
            r.done_p50_ms,
            r.done_p99_ms,
            r.server_rss_baseline_kib,
            r.server_rss_peak_kib,
            r.server_kib_per_conversation
        );
        if let Some(e) = &r.first_error {
            println!("       first error: {e}");
        }
    }
    Ok(u8::from(failed))
}
