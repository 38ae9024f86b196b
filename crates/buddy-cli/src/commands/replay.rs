//! `buddy replay`: a recorded turn run again under another policy, without calling the
//! model or any tool, beside what happened.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use buddy_cli::replay_view::{Summary, policy_changes, side_by_side};
use buddy_cli::runtime::Runtime;
use buddy_core::ChatEvent;
use buddy_engine::{LoopPolicy, Recording, replay};
use buddy_server::{PolicyFrom, replay_policy, stored_turns};
use buddy_store::{Store, StoreLocation};
use clap::Args;

use super::PolicyFlags;

/// `buddy replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// A stored conversation's id (`GET /v1/conversations` lists them).
    conversation: Option<String>,
    /// Only this turn of the conversation.
    #[arg(long, value_name = "TURN")]
    turn: Option<String>,
    /// Every stored turn, with a summary of the turns whose stop would change.
    #[arg(long)]
    all: bool,
    /// A `buddy run --json` output to replay instead of the store (repeatable).
    #[arg(long = "file", value_name = "FILE")]
    files: Vec<PathBuf>,
    /// SQLite file of the store (default: [server] db, else ./buddy.db); opened read-only.
    #[arg(long, value_name = "FILE")]
    db: Option<PathBuf>,
    /// A postgres:// URL of the store (default: [server] store); only read.
    #[arg(long, value_name = "URL", env = "BUDDY_STORE")]
    store: Option<String>,
    /// A file whose first line is the store's URL: a password in it stays off the
    /// command line. It wins over --store and $BUDDY_STORE.
    #[arg(long = "store-file", value_name = "FILE")]
    store_file: Option<PathBuf>,
    /// Where the policy starts: the one each turn ran with, or what buddy.toml gives its
    /// model now; the policy flags change it from there.
    #[arg(long, value_enum, default_value = "recorded")]
    policy_from: PolicyFromArg,
    /// One JSON comparison per line instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    policy: PolicyFlags,
}

/// `--policy-from`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum PolicyFromArg {
    Recorded,
    Config,
}

/// One turn to replay: its name for people and its recording (or why there is none).
struct Replayable {
    name: String,
    recording: Result<Recording, String>,
    /// A recording was there but could not be read: the replay is incomplete.
    unreadable: bool,
}

/// Replays what the arguments name; exits 0 when every turn stops as recorded, 1 when
/// some stop changes, 2 on bad input (a recording that cannot be read among it). Over
/// many turns (`--all`, several files) a turn or a conversation that cannot be read or
/// replayed is named on stderr and skipped, the others replayed, and the exit is 2.
pub async fn run(config_path: Option<&Path>, args: ReplayArgs) -> anyhow::Result<u8> {
    let runtime = Runtime::load(config_path)?;
    let config = runtime.config();
    let patch = args.policy.to_patch()?;
    let from = match args.policy_from {
        PolicyFromArg::Recorded => PolicyFrom::Recorded,
        PolicyFromArg::Config => PolicyFrom::Config,
    };
    let turns = if args.files.is_empty() {
        from_store(&runtime, &args).await?
    } else {
        if args.conversation.is_some() || args.all {
            anyhow::bail!(
                "--file replays recordings from files; leave out the conversation and --all"
            );
        }
        from_files(&args.files)?
    };
    if turns.is_empty() {
        anyhow::bail!("nothing to replay: no stored turns");
    }
    let started = Instant::now();
    let summarise = args.all || turns.len() > 1 && !args.files.is_empty();
    let mut summary = Summary::default();
    let mut described = None;
    let mut unreadable = 0;
    for turn in &turns {
        let recording = match &turn.recording {
            Ok(recording) => recording,
            Err(why) => {
                unreadable += usize::from(turn.unreadable);
                if !summarise || turn.unreadable {
                    eprintln!("{}: not replayable: {why}", turn.name);
                }
                summary.skipped.push((turn.name.clone(), why.clone()));
                continue;
            }
        };
        // A policy that cannot be built is the flags' fault: it ends the command.
        let policy = replay_policy(recording, from, &config.policy, &patch)
            .with_context(|| format!("{}: policy", turn.name))?;
        let comparison = match replay(recording, Some(policy.clone())).await {
            Ok(comparison) => comparison,
            // Over many turns a tape that cannot be played is reported and skipped.
            Err(e) if summarise => {
                eprintln!("{}: not replayable: {e}", turn.name);
                unreadable += 1;
                summary.skipped.push((turn.name.clone(), e.to_string()));
                continue;
            }
            Err(e) => return Err(anyhow::Error::from(e).context(turn.name.clone())),
        };
        described.get_or_insert_with(|| describe(&recording.tape.policy, &policy, from));
        summary.add(&turn.name, &comparison);
        if args.json {
            let line = serde_json::json!({"turn": turn.name, "replay": comparison});
            println!("{line}");
        } else if !args.all {
            let title = format!(
                "{} {}",
                turn.name,
                describe(&recording.tape.policy, &policy, from)
            );
            println!("{}", side_by_side(&title, &comparison));
        }
    }
    if summarise && !args.json {
        let policy = described.unwrap_or_default();
        print!("{}", summary.text(started.elapsed(), &policy));
    }
    if unreadable > 0 {
        eprintln!("{unreadable} recording(s) could not be read: the replay is incomplete");
        return Ok(2);
    }
    Ok(u8::from(summary.same < summary.replayed))
}

/// The policy a replay runs under, in words.
fn describe(recorded: &LoopPolicy, policy: &LoopPolicy, from: PolicyFrom) -> String {
    let changes = policy_changes(recorded, policy);
    let base = match from {
        PolicyFrom::Recorded => "under the recorded policy",
        PolicyFrom::Config => "under buddy.toml's policy",
    };
    if changes.is_empty() {
        base.to_owned()
    } else {
        format!("{base} with {}", changes.join(", "))
    }
}

/// The store the arguments (or buddy.toml's [server]) name, opened to read only.
async fn open_store(runtime: &Runtime, args: &ReplayArgs) -> anyhow::Result<Arc<dyn Store>> {
    let from_env = std::env::var("BUDDY_STORE").ok();
    let store = match (&args.store, &args.store_file) {
        (_, Some(file)) => Some(super::store_flags::store_from_file(file)?),
        (Some(url), None) => {
            if from_env.as_ref() != Some(url) {
                super::store_flags::warn_if_password_shown(url);
            }
            Some(url.clone())
        }
        (None, None) => None,
    };
    let location = runtime
        .store_location(store.as_deref(), args.db.as_deref())
        .context("--store / [server] store")?;
    if let StoreLocation::Sqlite(db) = &location
        && !db.is_file()
    {
        anyhow::bail!(
            "no conversation store at {}: give --db FILE (the database of `buddy serve`) or --store URL",
            db.display()
        );
    }
    Ok(location.open_read_only().await?.store)
}

/// The stored turns the arguments name.
async fn from_store(runtime: &Runtime, args: &ReplayArgs) -> anyhow::Result<Vec<Replayable>> {
    let store = open_store(runtime, args).await?;
    let conversations: Vec<String> = match (&args.conversation, args.all) {
        (Some(id), false) => vec![id.clone()],
        (None, true) => store
            .list_conversations(None)
            .await?
            .into_iter()
            .rev()
            .map(|c| c.id)
            .collect(),
        (Some(_), true) => anyhow::bail!("give a conversation or --all, not both"),
        (None, false) => anyhow::bail!(
            "name what to replay: a conversation id, --all, or --file FILE (see buddy replay --help)"
        ),
    };
    let mut out = Vec::new();
    for id in conversations {
        let turns = match stored_turns(&*store, &id).await {
            Ok(turns) => turns,
            // `--all` reads on past a conversation whose rows are damaged, and says so.
            Err(e) if args.all => {
                out.push(Replayable {
                    name: format!("conversation {id}"),
                    recording: Err(format!("its stored rows cannot be read ({e})")),
                    unreadable: true,
                });
                continue;
            }
            Err(e) => return Err(anyhow::Error::from(e).context(format!("conversation `{id}`"))),
        };
        let found = turns.len();
        for turn in turns {
            if args.turn.as_ref().is_some_and(|t| *t != turn.turn) {
                continue;
            }
            out.push(Replayable {
                name: format!(
                    "turn {} of {} ({})",
                    turn.turn, turn.conversation, turn.model
                ),
                recording: turn.recording,
                unreadable: turn.unreadable,
            });
        }
        if let Some(only) = &args.turn
            && out.is_empty()
        {
            anyhow::bail!("conversation `{id}` has no turn `{only}` ({found} turns)");
        }
    }
    Ok(out)
}

/// The recordings in `buddy run --json` outputs: each `recording` event is one turn.
fn from_files(files: &[PathBuf]) -> anyhow::Result<Vec<Replayable>> {
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let before = out.len();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let event: ChatEvent = serde_json::from_str(line).with_context(|| {
                format!(
                    "{}:{}: not an event of `buddy run --json`",
                    file.display(),
                    n + 1
                )
            })?;
            if let ChatEvent::Recording { recording } = event {
                let recording = serde_json::from_value::<Recording>(recording)
                    .map_err(|e| format!("its recording is unreadable ({e})"));
                let model = recording
                    .as_ref()
                    .map(|r| r.tape.model.clone())
                    .unwrap_or_default();
                out.push(Replayable {
                    name: format!(
                        "{} turn {} ({model})",
                        file.display(),
                        out.len() - before + 1
                    ),
                    unreadable: recording.is_err(),
                    recording,
                });
            }
        }
        if out.len() == before {
            anyhow::bail!(
                "{} holds no recording: record it with `buddy run --json … > FILE` from this buddy version",
                file.display()
            );
        }
    }
    Ok(out)
}
