//! `buddy bench loops`: every scenario through buddy -> HTTP -> mock-server.

use std::path::PathBuf;

use buddy_scripted::bench_loops::run_loops;
use buddy_skills::Sandbox;
use clap::Args;

use super::{load_all, tempdir_path};

/// `buddy bench loops`.
#[derive(Args, Debug)]
pub struct LoopsArgs {
    /// Directory of scenarios (default: ./scenarios, else the built-in ones).
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
    /// One JSON object per scenario instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark and prints its report; exit code 1 when a target is missed.
pub async fn run(args: LoopsArgs) -> anyhow::Result<u8> {
    let scenarios = load_all(args.scenarios)?;
    let sandbox_dir = tempdir_path()?;
    let sandbox = Sandbox::new(&sandbox_dir)?;
    let reports = run_loops(scenarios, &sandbox).await?;
    let _ = std::fs::remove_dir_all(&sandbox_dir);
    if args.json {
        for r in &reports {
            println!("{}", serde_json::to_string(r)?);
        }
    } else {
        println!(
            "{:<27} {:>5} {:>5} {:>5} {:>5} {:>6} {:>6} {:>6}  {:<17} {:<6} target",
            "scenario",
            "model",
            "mock",
            "tools",
            "ideal",
            "wasted",
            "bound",
            "guards",
            "stop reason",
            "answer"
        );
        for r in &reports {
            let opt = |v: Option<u32>| v.map_or("-".to_owned(), |v| v.to_string());
            println!(
                "{:<27} {:>5} {:>5} {:>5} {:>5} {:>6} {:>6} {:>6}  {:<17} {:<6} {}",
                r.scenario,
                r.model_calls,
                r.requests_seen_by_mock,
                r.tool_calls,
                opt(r.ideal_model_calls),
                opt(r.wasted),
                r.budget,
                r.guard_events,
                r.stop_reason.as_str(),
                if r.answered { "yes" } else { "no" },
                if r.meets_target { "met" } else { "MISSED" },
            );
        }
        let missed = reports.iter().filter(|r| !r.meets_target).count();
        println!(
            "\n{} scenarios over HTTP, {missed} missed their target.",
            reports.len()
        );
    }
    Ok(u8::from(reports.iter().any(|r| !r.meets_target)))
}
