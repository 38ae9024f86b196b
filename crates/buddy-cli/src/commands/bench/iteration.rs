//! `buddy bench iteration`: buddy's CPU per model call over a bare reqwest loop.

use anyhow::Context;
use buddy_bench::iteration::{IterationOptions, IterationReport, Side, run_iteration};
use buddy_bench::iteration_workload::Workload;
use clap::Args;

/// `buddy bench iteration`.
#[derive(Args, Debug)]
pub struct IterationArgs {
    /// The turns to measure (repeatable; default: every workload, one after the other).
    #[arg(long = "workload", short = 'w', value_enum, value_name = "WORKLOAD")]
    workloads: Vec<Workload>,
    /// Tool calls per turn (one per round; the turn makes one more model call); default:
    /// the workload's own (8 lookups, 12 pages).
    #[arg(long, value_name = "N")]
    calls: Option<usize>,
    /// Turns of each loop per repeat (the two loops take turns run by run).
    #[arg(long, value_name = "N", default_value_t = 50)]
    runs: usize,
    /// Repeats (the median is reported).
    #[arg(long, value_name = "N", default_value_t = 3)]
    repeats: usize,
    /// Whole replies instead of streamed ones (buddy streams by default).
    #[arg(long)]
    no_stream: bool,
    /// Both loops on one thread (a current_thread runtime): no wake-ups of a second
    /// worker, so the difference left is the work itself
    #[arg(long)]
    single_thread: bool,
    /// buddy's turn read as `Engine::events` (run on the reading task) instead of
    /// `Engine::spawn` (a task of its own, its events over a channel)
    #[arg(long)]
    events_inline: bool,
    /// The model name both loops send (it picks buddy's tokenizer).
    #[arg(long, value_name = "NAME", default_value = "gpt-4o-mini")]
    model: String,
    /// Run only one loop (to profile it alone).
    #[arg(long, value_enum, value_name = "SIDE")]
    only: Option<Side>,
    /// The most buddy may add per iteration, in µs of CPU, on every workload (exit 1
    /// when it adds more on any).
    #[arg(long, value_name = "US", default_value_t = 25.0)]
    target_us: f64,
    /// One JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs every workload asked for and prints their reports; exit code 1 when a target is
/// missed on any.
pub async fn run(args: IterationArgs) -> anyhow::Result<u8> {
    let buddy = std::env::current_exe().context("cannot find the buddy binary")?;
    let workloads = if args.workloads.is_empty() {
        Workload::ALL.to_vec()
    } else {
        args.workloads.clone()
    };
    let mut missed = false;
    for workload in workloads {
        let options = IterationOptions {
            workload,
            calls: args.calls.unwrap_or(workload.default_calls()).max(1),
            runs: args.runs.max(1),
            repeats: args.repeats.max(1),
            stream: !args.no_stream,
            only: args.only,
            model: args.model.clone(),
            single_thread: args.single_thread,
            events_inline: args.events_inline,
        };
        let r = run_iteration(&buddy, &options)
            .await
            .map_err(anyhow::Error::msg)?;
        let met = r
            .added_cpu_us_per_iteration
            .is_none_or(|added| added <= args.target_us);
        missed |= !met;
        if args.json {
            println!("{}", serde_json::to_string(&r)?);
        } else {
            print_report(&r, args.target_us, met);
        }
    }
    Ok(u8::from(missed))
}

/// One workload's table and verdict.
fn print_report(r: &IterationReport, target_us: f64, met: bool) {
    println!(
        "workload {}: {} model calls per turn, {} turns of each loop per repeat, {}, {}",
        r.workload.as_str(),
        r.model_calls_per_run,
        r.runs,
        if r.stream {
            "streamed"
        } else {
            "whole replies"
        },
        if r.single_thread {
            "one thread (current_thread runtime)"
        } else {
            "on a worker of the multi-thread runtime"
        }
    );
    if r.events_inline {
        println!("buddy's turn read as Engine::events (run on the reading task)");
    }
    println!(
        "{:>6} {:>6} {:>12} {:>12}",
        "repeat", "loop", "CPU/turn", "wall/turn"
    );
    for b in &r.batches {
        println!(
            "{:>6} {:>6} {:>10.3}ms {:>10.3}ms",
            b.repeat + 1,
            b.side.as_str(),
            b.cpu_ms_per_run,
            b.wall_ms_per_run
        );
    }
    if let Some(added) = r.added_cpu_us_per_iteration {
        println!(
            "{}: buddy adds {added:.1} µs of CPU per model call over the raw loop (median of the repeats; target <= {target_us:.0} µs: {})",
            r.workload.as_str(),
            if met { "met" } else { "MISSED" }
        );
    }
}
