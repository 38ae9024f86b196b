//! `buddy judge`: recorded conversations of any agent judged under a policy, executing
//! nothing — where buddy would have stopped each run, why, and a table of false stops on
//! solved runs, loops caught and calls saved.

use buddy_cli::runtime::Runtime;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use buddy_cli::judge_view::{JudgedRun, Summary, run_lines};
use buddy_engine::transcript::{LoggedRun, read_runs};
use buddy_engine::{LoopPolicy, PolicyPatch, judge_conversation};
use clap::Args;
use futures::StreamExt;

use super::PolicyFlags;

/// `buddy judge`.
#[derive(Args, Debug)]
pub struct JudgeArgs {
    /// Files of recorded conversations: a JSON array of OpenAI Chat messages, an object
    /// with `messages` (and optional `success`, `id`, `source`, `tools`), or JSONL with one
    /// conversation per line; `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// One JSON object per run, then one with the summary, instead of text.
    #[arg(long)]
    json: bool,
    /// List every run buddy would have touched (warned, altered), not only those it stops.
    #[arg(long)]
    all: bool,
    /// The summary table only.
    #[arg(long, conflicts_with = "all")]
    summary: bool,
    /// The model name policies are resolved for (buddy.toml's [policy.model."…"]) when a
    /// run names none.
    #[arg(long, default_value = "recorded")]
    model: String,
    #[command(flatten)]
    policy: PolicyFlags,
}

/// Judges every run of the files; exit 0 (1 when no run could be judged, 2 on bad flags).
pub async fn judge(config_path: Option<&Path>, args: JudgeArgs) -> anyhow::Result<u8> {
    let runtime = Runtime::load(config_path)?;
    let config = runtime.config();
    let env_patch = PolicyPatch::from_env(std::env::vars())?;
    let flag_patch = args.policy.to_patch()?;
    let policy_for = |model: &str| -> anyhow::Result<LoopPolicy> {
        config
            .policy
            .resolve(model, &[&env_patch, &flag_patch])
            .context("policy")
    };
    // Checked once up front, so a bad flag fails before any file is read.
    policy_for(&args.model)?;
    let started = Instant::now();
    let mut summary = Summary::default();
    let mut runs: Vec<LoggedRun> = Vec::new();
    for file in &args.files {
        let label = file.display().to_string();
        let text = if label == "-" {
            std::io::read_to_string(std::io::stdin()).context("reading standard input")?
        } else {
            std::fs::read_to_string(file).with_context(|| format!("reading {label}"))?
        };
        for read in read_runs(&text, &label) {
            match read {
                Ok(run) => runs.push(run),
                Err(e) => {
                    eprintln!("buddy judge: skipped {e}");
                    summary.unreadable(&file_source(&label));
                }
            }
        }
    }
    let total = runs.len();
    let width = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut judged = futures::stream::iter(runs.into_iter().map(|run| {
        let policy = policy_for(run.model.as_deref().unwrap_or(&args.model));
        tokio::spawn(async move {
            let policy = policy?;
            let model = run.model.clone().unwrap_or_else(|| "recorded".to_owned());
            let judgement = judge_conversation(&model, run.messages, &run.tools, &policy).await;
            anyhow::Ok((run.id, run.source, run.success, judgement))
        })
    }))
    .buffered(width * 2);
    let mut judged_runs = 0usize;
    while let Some(joined) = judged.next().await {
        let (id, source, success, judgement) = joined.context("a judging task failed")??;
        let judgement = match judgement {
            Ok(judgement) => judgement,
            Err(e) => {
                eprintln!("buddy judge: skipped {id}: {e}");
                summary.unreadable(&source);
                continue;
            }
        };
        judged_runs += 1;
        let run = JudgedRun {
            loop_caught: judgement.loop_caught(),
            long_loop_ended: judgement.long_loop_ended(),
            id,
            source,
            success,
            judgement,
        };
        summary.add(&run);
        if args.json {
            let mut line = serde_json::to_value(&run)?;
            line["type"] = "run".into();
            println!("{line}");
        } else if !args.summary {
            print!("{}", run_lines(&run, args.all));
        }
    }
    let policy = policy_for(&args.model)?;
    if args.json {
        let line = serde_json::json!({
            "type": "summary",
            "by_source": summary.by_source,
            "all": summary.all,
            "policy": policy,
        });
        println!("{line}");
    } else {
        println!(
            "\njudged {judged_runs} of {total} runs in {:.1} s under {}\n",
            started.elapsed().as_secs_f64(),
            policy_words(&policy)
        );
        print!("{}", summary.table());
    }
    Ok(u8::from(judged_runs == 0 && total > 0))
}

/// The source a file's unreadable runs count under (as `read_runs` names it).
fn file_source(label: &str) -> String {
    Path::new(label)
        .file_stem()
        .map_or_else(|| label.to_owned(), |s| s.to_string_lossy().into_owned())
}

/// The policy's fields that differ from buddy's defaults, or "the default policy".
fn policy_words(policy: &LoopPolicy) -> String {
    let default = LoopPolicy::default();
    let changes: Vec<String> = buddy_engine::POLICY_FIELDS
        .iter()
        .filter(|f| f.value_words(&default) != f.value_words(policy))
        .map(|f| format!("{} = {}", f.name, f.value_words(policy)))
        .collect();
    if changes.is_empty() {
        "the default policy".to_owned()
    } else {
        format!("the default policy with {}", changes.join(", "))
    }
}
