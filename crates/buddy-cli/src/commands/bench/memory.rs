//! `buddy bench memory`: peak memory of turns carrying large tool-call arguments.

use std::path::PathBuf;

use anyhow::Context;
use buddy_bench::memory::{MemoryOptions, MemoryVia, run_memory};
use buddy_bench::memory_path::MemoryPath;
use clap::Args;

/// `buddy bench memory`.
#[derive(Args, Debug)]
pub struct MemoryArgs {
    /// Turns at once.
    #[arg(long = "turns", short = 'n', value_name = "N", default_value_t = 8)]
    turns: usize,
    /// Size of each reply's tool-call argument, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 15.0)]
    argument_mib: f64,
    /// How the turn goes on after the large call: answered, overflowing the model's
    /// window, a failing tool, arguments the schema refuses, a refused request.
    #[arg(long, value_enum, default_value_t = MemoryPath::Completed)]
    path: MemoryPath,
    /// The process measured: `buddy serve` (N turns at once) or `buddy run` (one turn).
    #[arg(long, value_enum, default_value_t = MemoryVia::Serve)]
    via: MemoryVia,
    /// The most peak memory over the baseline may be, per byte of argument in flight
    /// (exit 1 when it is more).
    #[arg(long, value_name = "X", default_value_t = 2.5)]
    target: f64,
    /// Measure this `buddy` binary (another build, for a before/after); the mock model
    /// server is always this one.
    #[arg(long, value_name = "PATH")]
    server: Option<PathBuf>,
    /// One JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark and prints its report; exit code 1 when a target is missed.
pub async fn run(args: MemoryArgs) -> anyhow::Result<u8> {
    let buddy = std::env::current_exe().context("cannot find the buddy binary")?;
    if !(args.argument_mib.is_finite() && args.argument_mib > 0.0) {
        anyhow::bail!("--argument-mib must be a positive size in MiB, such as 15 or 0.25");
    }
    let options = MemoryOptions {
        turns: args.turns.max(1),
        argument_bytes: ((args.argument_mib * 1024.0 * 1024.0) as usize).max(1024),
        path: args.path,
        via: args.via,
        server: args.server,
    };
    let r = run_memory(&buddy, &options)
        .await
        .map_err(anyhow::Error::msg)?;
    let met = r.completed == r.turns && r.peak_per_argument_byte <= args.target;
    if args.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "{} turn(s) at once through buddy {}, {:.2} MiB of tool-call arguments each, path {}: {} ended {}",
            r.turns,
            if r.via == MemoryVia::Run {
                "run"
            } else {
                "serve"
            },
            r.argument_mib,
            args.path.name(),
            r.completed,
            args.path.expected_reason()
        );
        println!(
            "rss baseline {:.0} MiB, peak {:.0} MiB: {:.2}x the arguments in flight (target <= {:.1}x: {})",
            r.rss_baseline_mib,
            r.rss_peak_mib,
            r.peak_per_argument_byte,
            args.target,
            if met { "met" } else { "MISSED" }
        );
        if r.via == MemoryVia::Serve {
            println!(
                "resident 2 s after the turns: {:.0} MiB over the baseline; database file +{:.1} MiB per turn (write-ahead log {:.1} MiB)",
                r.rss_after_mib, r.db_growth_mib_per_turn, r.wal_mib
            );
        }
        if let Some(e) = &r.first_error {
            println!("first error: {e}");
        }
    }
    Ok(u8::from(!met))
}
