//! `buddy mock-server` and `buddy bench` (loops, load, replay).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use buddy_scripted::bench_loops::run_loops;
use buddy_scripted::library;
use buddy_scripted::mock_server::MockServer;
use buddy_scripted::run::scenarios_dir;
use buddy_skills::Sandbox;
use clap::{Args, Subcommand};

/// `buddy mock-server`.
#[derive(Args, Debug)]
pub struct MockServerArgs {
    /// Address to listen on (port 0 picks one; the address is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8090")]
    listen: String,
    /// Directory of scenarios to serve (default: ./scenarios, else the built-in ones).
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
    /// Append every request, one JSON object per line, to this file.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Wait this long before answering each request (simulates model latency).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    latency_ms: u64,
}

/// `buddy bench …`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    kind: BenchKind,
}

#[derive(Subcommand, Debug)]
enum BenchKind {
    /// Loop efficiency: every scenario through buddy -> HTTP -> mock-server.
    Loops(LoopsArgs),
    /// Load: N concurrent streaming chats against `buddy serve` backed by `buddy mock-server`.
    Load(LoadArgs),
    /// Replay: N scenario turns stored in a fresh SQLite store, then `buddy replay --all` timed on it.
    Replay(ReplayBenchArgs),
    /// Memory: N turns at once against `buddy serve`, each reply carrying a large tool-call argument.
    Memory(MemoryArgs),
    /// Iteration: buddy's CPU per model call over a bare reqwest loop, against one mock.
    Iteration(IterationArgs),
    /// Gateway: latency `buddy serve` adds to /v1/chat/completions at fixed request rates.
    Gateway(GatewayArgs),
}

#[derive(Args, Debug)]
struct GatewayArgs {
    /// Requests per second (repeatable; each is one phase per target and mode).
    #[arg(long = "rate", short = 'r', value_name = "N", default_values_t = [100, 1000, 2000, 5000])]
    rates: Vec<u32>,
    /// Seconds of each measured phase (a warm-up of a fifth of it comes first).
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    secs: f64,
    /// Only streamed replies, or only whole ones (default: both).
    #[arg(long, value_enum, value_name = "MODE")]
    only: Option<GatewayMode>,
    /// The most buddy may add to the p99 at 1,000 requests/s, in ms (exit 1 when more).
    #[arg(long, value_name = "MS", default_value_t = 1.0)]
    target_ms: f64,
    /// One JSON object per rate and mode instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum GatewayMode {
    Stream,
    Whole,
}

#[derive(Args, Debug)]
struct IterationArgs {
    /// Tool calls per turn (one per round; the turn makes one more model call).
    #[arg(long, value_name = "N", default_value_t = 8)]
    calls: usize,
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
    /// The model name both loops send (it picks buddy's tokenizer).
    #[arg(long, value_name = "NAME", default_value = "gpt-4o-mini")]
    model: String,
    /// Run only one loop (to profile it alone).
    #[arg(long, value_enum, value_name = "SIDE")]
    only: Option<buddy_cli::bench_iteration::Side>,
    /// The most buddy may add per iteration, in µs of CPU (exit 1 when it adds more).
    #[arg(long, value_name = "US", default_value_t = 50.0)]
    target_us: f64,
    /// One JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct MemoryArgs {
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

#[derive(Args, Debug)]
struct ReplayBenchArgs {
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

#[derive(Args, Debug)]
struct LoadArgs {
    /// Concurrent conversations (repeatable: each is one run).
    #[arg(long = "conversations", short = 'n', value_name = "N", default_values_t = [100, 1000])]
    conversations: Vec<usize>,
    /// Latency of every model call at the mock, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    latency_ms: u64,
    /// Bound on each run, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    timeout_secs: u64,
    /// Directory of scenarios for the mock (default: ./scenarios, else the built-in ones).
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
    /// `buddy serve` instances sharing the load (more than one needs --store).
    #[arg(long, value_name = "N", default_value_t = 1)]
    instances: usize,
    /// A postgres:// URL the instances share (default: one SQLite file).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Chats run first and not measured (the servers' connections and caches warm up).
    #[arg(long, value_name = "N", default_value_t = 0)]
    warmup: usize,
    /// One JSON object per run instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct LoopsArgs {
    /// Directory of scenarios (default: ./scenarios, else the built-in ones).
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
    /// One JSON object per scenario instead of the table.
    #[arg(long)]
    json: bool,
}

/// The scenarios a benchmark runs: `dir`, else ./scenarios, else the built-in ones.
fn load_all(dir: Option<PathBuf>) -> anyhow::Result<Vec<buddy_scripted::Scenario>> {
    Ok(library::load(dir.as_deref())?.0)
}

/// Runs the mock server until Ctrl-C.
pub async fn mock_server(args: MockServerArgs) -> anyhow::Result<u8> {
    let scenarios = load_all(args.scenarios)?;
    let log: Option<Box<dyn std::io::Write + Send>> = match &args.log {
        Some(path) => Some(Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log {}", path.display()))?,
        )),
        None => None,
    };
    let count = scenarios.len();
    let server = MockServer::new(scenarios, Duration::from_millis(args.latency_ms), log);
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    eprintln!(
        "buddy mock-server on http://{}/v1 ({count} scenarios)",
        listener.local_addr()?
    );
    server
        .serve(listener, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(0)
}

/// Runs a benchmark; exit code 1 when a target is missed.
pub async fn bench(args: BenchArgs) -> anyhow::Result<u8> {
    match args.kind {
        BenchKind::Load(args) => {
            let buddy = std::env::current_exe().context("cannot find the buddy binary")?;
            let scenarios = std::fs::canonicalize(scenarios_dir(args.scenarios))?;
            if !args.json {
                println!(
                    "{:>6} {:>6} {:>6} {:>8} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9}",
                    "conv",
                    "done",
                    "errors",
                    "turns/s",
                    "first p50",
                    "first p99",
                    "done p50",
                    "done p99",
                    "rss base",
                    "rss peak",
                    "KiB/conv"
                );
            }
            let mut failed = false;
            for n in args.conversations {
                let options = buddy_cli::bench_load::LoadOptions {
                    conversations: n,
                    latency_ms: args.latency_ms,
                    timeout: Duration::from_secs(args.timeout_secs),
                    scenarios: scenarios.clone(),
                    instances: args.instances,
                    store: args.store.clone(),
                    warmup: args.warmup,
                };
                let r = buddy_cli::bench_load::run_load(&buddy, &options)
                    .await
                    .map_err(anyhow::Error::msg)?;
                failed |= r.errors > 0;
                if args.json {
                    println!("{}", serde_json::to_string(&r)?);
                    continue;
                }
                println!(
                    "{:>6} {:>6} {:>6} {:>8.0} {:>7.1}ms {:>7.1}ms {:>7.0}ms {:>7.0}ms {:>7}KiB {:>7}KiB {:>9.1}",
                    r.conversations,
                    r.completed,
                    r.errors,
                    r.turns_per_sec,
                    r.first_event_p50_ms,
                    r.first_event_p99_ms,
                    r.done_p50_ms,
                    r.done_p99_ms,
                    r.server_rss_baseline_kib,
                    r.server_rss_peak_kib,
                    r.server_kib_per_conversation
                );
                if let Some(e) = &r.first_error {
                    println!("       first error: {e}");
                }
            }
            Ok(u8::from(failed))
        }
        BenchKind::Memory(args) => {
            let buddy = std::env::current_exe().context("cannot find the buddy binary")?;
            let options = buddy_cli::bench_memory::MemoryOptions {
                turns: args.turns.max(1),
                argument_bytes: args.argument_mib.max(1) * 1024 * 1024,
                server: args.server,
            };
            let r = buddy_cli::bench_memory::run_memory(&buddy, &options)
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
        BenchKind::Gateway(args) => {
            let buddy = std::env::current_exe().context("cannot find the buddy binary")?;
            let options = buddy_cli::bench_gateway::GatewayOptions {
                rates: args.rates.iter().copied().filter(|r| *r > 0).collect(),
                phase: Duration::from_secs_f64(args.secs.clamp(0.5, 600.0)),
                modes: match args.only {
                    Some(GatewayMode::Stream) => vec![true],
                    Some(GatewayMode::Whole) => vec![false],
                    None => vec![false, true],
                },
                timeout: Duration::from_secs(30),
            };
            let reports = buddy_cli::bench_gateway::run_gateway(&buddy, &options)
                .await
                .map_err(anyhow::Error::msg)?;
            let missed = reports
                .iter()
                .any(|r| r.rate == 1000 && (!r.held || r.added_p99_ms > args.target_ms));
            if args.json {
                for r in &reports {
                    println!("{}", serde_json::to_string(r)?);
                }
                return Ok(u8::from(missed));
            }
            println!(
                "{:>6} {:>6} {:>8} {:>6} | {:>24} | {:>24} | {:>24} | {:>5}",
                "mode",
                "rate",
                "achieved",
                "errors",
                "mock p50/p99/p999 ms",
                "buddy p50/p99/p999 ms",
                "added p50/p99/p999 ms",
                "held"
            );
            for r in &reports {
                println!(
                    "{:>6} {:>6} {:>8.0} {:>6} | {:>7.2} {:>7.2} {:>8.2} | {:>7.2} {:>7.2} {:>8.2} | {:>7.2} {:>7.2} {:>8.2} | {:>5}",
                    if r.stream { "stream" } else { "whole" },
                    r.rate,
                    r.buddy.achieved_per_sec,
                    r.buddy.errors + r.direct.errors,
                    r.direct.p50_ms,
                    r.direct.p99_ms,
                    r.direct.p999_ms,
                    r.buddy.p50_ms,
                    r.buddy.p99_ms,
                    r.buddy.p999_ms,
                    r.added_p50_ms,
                    r.added_p99_ms,
                    r.added_p999_ms,
                    if r.held { "yes" } else { "NO" },
                );
                if let Some(e) = r
                    .buddy
                    .first_error
                    .as_ref()
                    .or(r.direct.first_error.as_ref())
                {
                    println!("       first error: {e}");
                }
            }
            for stream in [false, true] {
                let mode = if stream { "streamed" } else { "whole" };
                let runs = reports.iter().filter(|r| r.stream == stream);
                if let Some(broke) = runs.clone().find(|r| !r.held) {
                    println!(
                        "{mode}: held up to the rate before {} requests/s, which did not hold",
                        broke.rate
                    );
                } else if let Some(top) = runs.map(|r| r.rate).max() {
                    println!("{mode}: held at every rate measured (up to {top} requests/s)");
                }
            }
            Ok(u8::from(missed))
        }
        BenchKind::Iteration(args) => {
            let buddy = std::env::current_exe().context("cannot find the buddy binary")?;
            let options = buddy_cli::bench_iteration::IterationOptions {
                calls: args.calls.max(1),
                runs: args.runs.max(1),
                repeats: args.repeats.max(1),
                stream: !args.no_stream,
                only: args.only,
                model: args.model,
                single_thread: args.single_thread,
            };
            let r = buddy_cli::bench_iteration::run_iteration(&buddy, &options)
                .await
                .map_err(anyhow::Error::msg)?;
            let met = r
                .added_cpu_us_per_iteration
                .is_none_or(|added| added <= args.target_us);
            if args.json {
                println!("{}", serde_json::to_string(&r)?);
                return Ok(u8::from(!met));
            }
            println!(
                "{} model calls per turn, {} turns of each loop per repeat, {}, {}",
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
                    "buddy adds {added:.1} µs of CPU per model call over the raw loop (median of the repeats; target <= {:.0} µs: {})",
                    args.target_us,
                    if met { "met" } else { "MISSED" }
                );
            }
            Ok(u8::from(!met))
        }
        BenchKind::Replay(args) => {
            super::bench_replay::bench_replay(
                &load_all(args.scenarios)?,
                args.turns,
                args.repeats.max(1),
            )
            .await
        }
        BenchKind::Loops(args) => {
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
    }
}

/// A fresh empty directory for the built-in file skills during a benchmark.
fn tempdir_path() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("buddy-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
