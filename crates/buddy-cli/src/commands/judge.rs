//! `buddy judge`: recorded conversations of any agent judged under a policy, executing
//! nothing — where buddy would have stopped each run, why, and a table of false stops on
//! solved runs, loops caught and calls saved.

use buddy_cli::runtime::Runtime;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use buddy_cli::judge_view::{JudgedRun, Summary, legend, run_lines};
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
    /// Largest input judged, in bytes, per file (or standard input); a larger one is
    /// refused before it is read whole (exit 2). Raise it for a larger corpus file.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_INPUT_BYTES)]
    max_input_bytes: u64,
    /// The model name policies are resolved for (buddy.toml's [policy.model."…"]) when a
    /// run names none.
    #[arg(long, default_value = "recorded")]
    model: String,
    #[command(flatten)]
    policy: PolicyFlags,
}

/// `--max-input-bytes` unless given: 1 GiB, several times the largest source of the
/// judge's corpus, far below what would exhaust a machine's memory.
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 1 << 30;

/// Judges every run of the files. Exit 0: runs were judged (a run that cannot be read
/// is named on stderr and skipped); 1: no run was judged (none in the input, or none
/// readable); 2: a bad flag or config, a file that cannot be read, or one past
/// `--max-input-bytes`.
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
        let text = read_bounded(file, &label, args.max_input_bytes)?;
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
        print!("{}", legend());
    }
    Ok(u8::from(judged_runs == 0))
}

/// The text of `file` (`-`: standard input), refused past `limit` bytes: a file by its
/// size before it is read, standard input after `limit` bytes of it.
fn read_bounded(file: &Path, label: &str, limit: u64) -> anyhow::Result<String> {
    use std::io::Read;
    let too_large = || {
        anyhow::anyhow!(
            "{label} is larger than {limit} bytes (--max-input-bytes); split it, or raise --max-input-bytes to judge it whole"
        )
    };
    let reader: Box<dyn Read> = if label == "-" {
        Box::new(std::io::stdin())
    } else {
        let opened = std::fs::File::open(file).with_context(|| format!("reading {label}"))?;
        if opened.metadata().is_ok_and(|m| m.len() > limit) {
            return Err(too_large());
        }
        Box::new(opened)
    };
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {label}"))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    String::from_utf8(bytes).with_context(|| format!("reading {label}: it is not UTF-8 text"))
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
