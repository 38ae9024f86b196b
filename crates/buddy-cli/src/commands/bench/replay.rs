//! `buddy bench replay`: how long `buddy replay --all` takes over many stored turns.
//! Turns of the scenarios are recorded into a fresh SQLite store as `buddy serve`
//! stores them (messages by turn, the tape with the turn), then the real command is run
//! on it and timed from outside, process start included.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use buddy_scripted::Scenario;
use buddy_scripted::run::run_scenario;
use buddy_skills::Sandbox;
use buddy_store::{SqliteStore, new_id, prelude::*};
use clap::Args;

use super::load_all;

/// The target of issue "replay": every stored turn of a thousand in under two seconds.
const TARGET_SECS: f64 = 2.0;

/// `buddy bench replay`.
#[derive(Args, Debug)]
pub struct ReplayBenchArgs {
    /// Stored turns to replay (one conversation each, the scenarios taken in turn).
    #[arg(long = "turns", short = 'n', value_name = "N", default_value_t = 1000)]
    turns: usize,
    /// Runs of `buddy replay --all` (the median is reported).
    #[arg(long, value_name = "N", default_value_t = 3)]
    repeats: usize,
    /// Directory of scenarios (default: ./scenarios, else the built-in ones).
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
}

/// Runs the benchmark over the scenarios the flags name.
pub async fn run(args: ReplayBenchArgs) -> anyhow::Result<u8> {
    bench_replay(&load_all(args.scenarios)?, args.turns, args.repeats.max(1)).await
}

/// Records `turns` scenario turns, times `buddy replay --all` on them `repeats` times,
/// prints the figures; exit code 1 when the target is missed or a turn does not replay.
async fn bench_replay(scenarios: &[Scenario], turns: usize, repeats: usize) -> anyhow::Result<u8> {
    if scenarios.is_empty() {
        anyhow::bail!("no scenarios to record");
    }
    let dir = std::env::temp_dir().join(format!("buddy-bench-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("buddy.db");
    let sandbox = Sandbox::new(&dir)?;
    let started = Instant::now();
    {
        let store = SqliteStore::open(&db)?;
        for n in 0..turns {
            let scenario = scenarios[n % scenarios.len()].clone();
            let report = run_scenario(scenario, &sandbox, &[]).await?;
            let Some(recording) = &report.recording else {
                anyhow::bail!("scenario `{}` left no recording", report.name);
            };
            let conversation = store.create_conversation("bench").await?;
            let turn = new_id("turn");
            store
                .begin_turn(&conversation, &turn, &recording.tape.model)
                .await?;
            store
                .append_messages(&conversation, &turn, &report.messages)
                .await?;
            let tape = serde_json::to_string(&recording.tape)?;
            store
                .finish_turn(&turn, report.reason, &report.stats, None, Some(&tape))
                .await?;
        }
    }
    let recorded = started.elapsed();
    println!(
        "recorded {turns} turns of {} scenarios into {} in {:.2} s",
        scenarios.len(),
        db.display(),
        recorded.as_secs_f64()
    );
    let buddy = std::env::current_exe().context("cannot find the buddy binary")?;
    let mut times = Vec::with_capacity(repeats);
    let mut last = String::new();
    let mut all_same = true;
    for _ in 0..repeats {
        let started = Instant::now();
        let out = std::process::Command::new(&buddy)
            .args(["replay", "--all", "--db"])
            .arg(&db)
            .current_dir(&dir)
            .output()
            .context("cannot run buddy replay")?;
        times.push(started.elapsed().as_secs_f64());
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        all_same &= out.status.success();
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let runs: Vec<String> = times.iter().map(|t| format!("{t:.2}")).collect();
    println!(
        "buddy replay --all over {turns} stored turns: {median:.2} s (median of {repeats}: {} s); {:.0} µs per turn",
        runs.join(", "),
        median * 1e6 / turns.max(1) as f64
    );
    print!("{last}");
    let met = median < TARGET_SECS;
    println!(
        "target: under {TARGET_SECS:.0} s: {}; every turn stops as recorded: {}",
        if met { "met" } else { "MISSED" },
        if all_same { "yes" } else { "NO" }
    );
    Ok(u8::from(!met || !all_same))
}
