//! `buddy demo`: every scenario, one table.

use std::path::PathBuf;

use anyhow::Context;
use buddy_scripted::library;
use buddy_scripted::run::run_scenario;
use buddy_skills::Sandbox;
use clap::Args;

use super::PolicyFlags;

/// `buddy demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Directory of scenario files (default: ./scenarios, else the ones built into buddy).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// One JSON report per scenario on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Directory the built-in file skills are confined to (default: the current directory).
    #[arg(long, value_name = "DIR")]
    sandbox: Option<PathBuf>,
    /// Policy overrides on top of each scenario's own policy (expectations assume none).
    #[command(flatten)]
    policy: PolicyFlags,
}

const ANSWER_WIDTH: usize = 46;

fn first_line(answer: &str) -> String {
    let line = answer.lines().next().unwrap_or_default();
    if line.chars().count() > ANSWER_WIDTH {
        format!(
            "{}…",
            line.chars().take(ANSWER_WIDTH - 1).collect::<String>()
        )
    } else {
        line.to_owned()
    }
}

/// Runs the scenarios; exit code 1 when any missed its expected outcome.
pub async fn demo(args: DemoArgs) -> anyhow::Result<u8> {
    let sandbox_dir = match args.sandbox {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    let sandbox = Sandbox::new(&sandbox_dir).context("--sandbox")?;
    let flags = args.policy.to_patch()?;
    let (scenarios, _) = library::load(args.dir.as_deref())?;
    let count = scenarios.len();
    if !args.json {
        println!(
            "{:<27} {:>5} {:>5}  {:<16} {:<ANSWER_WIDTH$}  ok",
            "scenario", "model", "tools", "stop reason", "answer"
        );
    }
    let mut failed = 0;
    for scenario in scenarios {
        let report = run_scenario(scenario, &sandbox, &[&flags]).await?;
        if !report.passed() {
            failed += 1;
        }
        if args.json {
            println!("{}", serde_json::to_string(&report)?);
            continue;
        }
        let verdict = if report.passed() {
            "yes".to_owned()
        } else {
            format!("NO: {}", report.mismatches.join("; "))
        };
        println!(
            "{:<27} {:>5} {:>5}  {:<16} {:<ANSWER_WIDTH$}  {verdict}",
            report.name,
            report.stats.model_calls,
            report.stats.tool_calls,
            report.reason.as_str(),
            first_line(&report.answer),
        );
    }
    if !args.json {
        println!(
            "\n{} scenarios, {} met their expected outcome, {failed} did not.",
            count,
            count - failed
        );
    }
    Ok(u8::from(failed > 0))
}
