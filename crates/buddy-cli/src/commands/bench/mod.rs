//! `buddy bench` (loops, load, replay, memory, iteration, gateway, cancel): each kind's flags and
//! report in a file of its own; the measuring is in the `buddy-bench` crate.

mod cache;
mod cancel;
mod gateway;
mod iteration;
mod load;
mod loops;
mod memory;
mod replay;

use std::path::PathBuf;

use buddy_scripted::library;
use clap::{Args, Subcommand};

/// `buddy bench …`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    kind: BenchKind,
}

#[derive(Subcommand, Debug)]
enum BenchKind {
    /// Loop efficiency: every scenario through buddy -> HTTP -> mock-server.
    Loops(loops::LoopsArgs),
    /// Load: N concurrent streaming chats against `buddy serve` backed by `buddy mock-server`.
    Load(load::LoadArgs),
    /// Replay: N scenario turns stored in a fresh SQLite store, then `buddy replay --all` timed on it.
    Replay(replay::ReplayBenchArgs),
    /// Memory: N turns at once against `buddy serve`, each reply carrying a large tool-call argument.
    Memory(memory::MemoryArgs),
    /// Iteration: buddy's CPU per model call over a bare reqwest loop, against one mock.
    Iteration(iteration::IterationArgs),
    /// Gateway: latency `buddy serve` adds to /v1/chat/completions at fixed request rates.
    Gateway(gateway::GatewayArgs),
    /// Cancel: how fast a cancel ends every sub-agent, process and model stream of a tree.
    Cancel(cancel::CancelArgs),
    /// Cache: what the provider's prompt cache bills of a turn's input, against no cache.
    Cache(cache::CacheArgs),
}

/// The scenarios a benchmark runs: `dir`, else ./scenarios, else the built-in ones.
pub(super) fn load_all(dir: Option<PathBuf>) -> anyhow::Result<Vec<buddy_scripted::Scenario>> {
    Ok(library::load(dir.as_deref())?.0)
}

/// Runs a benchmark; exit code 1 when a target is missed.
pub async fn bench(args: BenchArgs) -> anyhow::Result<u8> {
    match args.kind {
        BenchKind::Load(args) => load::run(args).await,
        BenchKind::Memory(args) => memory::run(args).await,
        BenchKind::Gateway(args) => gateway::run(args).await,
        BenchKind::Iteration(args) => iteration::run(args).await,
        BenchKind::Replay(args) => replay::run(args).await,
        BenchKind::Loops(args) => loops::run(args).await,
        BenchKind::Cancel(args) => cancel::run(args).await,
        BenchKind::Cache(args) => cache::run(args).await,
    }
}

/// A fresh empty directory for the built-in file skills during a benchmark.
fn tempdir_path() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("buddy-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
