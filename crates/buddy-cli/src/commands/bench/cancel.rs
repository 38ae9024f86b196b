//! `buddy bench cancel`: how fast a cancel reaches every descendant of a tree of agents.

use clap::Args;

use buddy_bench::cancel::run_cancel;

use super::tempdir_path;

/// `buddy bench cancel`.
#[derive(Args, Debug)]
pub struct CancelArgs {
    /// Rounds: each an 8-wide fan-out cancelled while 4 children are busy.
    #[arg(long, default_value_t = 200)]
    rounds: usize,
    /// The report as one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark; exit code 1 when a target is missed.
pub async fn run(args: CancelArgs) -> anyhow::Result<u8> {
    let sandbox = tempdir_path()?;
    let report = run_cancel(args.rounds.max(1), &sandbox).await?;
    let _ = std::fs::remove_dir_all(&sandbox);
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{} rounds, {} sub-agents each (4 running: 2 in a `sleep` process, 2 in a model stream that never ends), cancelled mid fan-out",
            report.rounds, report.children_per_round
        );
        println!(
            "{:<34} {:>9} {:>9} {:>9}",
            "from the cancel to", "p50 ms", "p99 ms", "max ms"
        );
        println!(
            "{:<34} {:>9.2} {:>9.2} {:>9.2}",
            "the turn's terminal event",
            report.terminal_p50_ms,
            report.terminal_p99_ms,
            report.terminal_max_ms
        );
        println!(
            "{:<34} {:>9.2} {:>9.2} {:>9.2}",
            "no process, no stream left",
            report.quiet_p50_ms,
            report.quiet_p99_ms,
            report.quiet_max_ms
        );
        println!("orphans (alive 5 s after a cancel): {}", report.orphans);
        println!(
            "target (every descendant ends within 250 ms, p99 <= 1 s, no orphan): {}",
            if report.met() { "met" } else { "MISSED" }
        );
    }
    Ok(u8::from(!report.met()))
}
