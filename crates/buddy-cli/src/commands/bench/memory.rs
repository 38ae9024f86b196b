//! `buddy bench memory`: peak memory of turns carrying large tool-call arguments.

use std::path::PathBuf;

use anyhow::Context;
use buddy_bench::memory::{MemoryOptions, run_memory};
use clap::Args;

/// `buddy bench memory`.
#[derive(Args, Debug)]
pub struct MemoryArgs {
    /// Turns at once.
    #[arg(long = "turns", short = 'n', value_name = "N", default_value_t = 8)]
    turns: usize,
    /// Size of each reply's tool-call argument, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 15)]
    argument_mib: usize,
    /// The most peak memory over the baseline may be, per byte of argument in flight
    /// (exit 1 when it is more).
    #[arg(long, value_name = "X", default_value_t = 3.0)]
    target: f64,
    /// Measure this `buddy` binary as the server (another build, for a before/after);
    /// the mock model server is always this one.
    #[arg(long, value_name = "PATH")]
    server: Option<PathBuf>,
    /// One JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark and prints its report; exit code 1 when a target is missed.
pub async fn run(args: MemoryArgs) -> anyhow::Result<u8> {
    let buddy = std::env::current_exe().context("cannot find the buddy binary")?;
    let options = MemoryOptions {
        turns: args.turns.max(1),
        argument_bytes: args.argument_mib.max(1) * 1024 * 1024,
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
            "{} turns at once, {:.0} MiB of tool-call arguments each: {} completed",
            r.turns, r.argument_mib, r.completed
        );
        println!(
            "rss baseline {:.0} MiB, peak {:.0} MiB: {:.2}x the arguments in flight (target <= {:.1}x: {})",
            r.rss_baseline_mib,
            r.rss_peak_mib,
            r.peak_per_argument_byte,
            args.target,
            if met { "met" } else { "MISSED" }
        );
        println!(
            "resident 2 s after the turns: {:.0} MiB over the baseline; database file +{:.1} MiB per turn (write-ahead log {:.1} MiB)",
            r.rss_after_mib, r.db_growth_mib_per_turn, r.wal_mib
        );
        if let Some(e) = &r.first_error {
            println!("first error: {e}");
        }
    }
    Ok(u8::from(!met))
}
