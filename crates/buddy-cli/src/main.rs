//! `buddy`: run, chat with and demo the agent loop from the command line.

mod commands;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use commands::{
    BenchArgs, ChatArgs, DemoArgs, DoctorArgs, McpArgs, MockServerArgs, ReplayArgs, RunArgs,
    ServeArgs,
};

/// buddy — an LLM agent runtime whose every turn ends, quickly, with an answer and a stated reason.
///
/// Without a configured provider buddy uses its built-in scripted model, so everything
/// here works offline. Exit codes: 0 completed; 1 provider/skill/store error; 2 bad usage
/// or config; 3 a limit; 4 a loop (buddy's guards or the model server's); 5 context
/// overflow; 6 truncated; 7 no answer; 8 repetitive output; 9 approval required;
/// 130 cancelled; 141 stdout's reader went away.
#[derive(Parser, Debug)]
#[command(
    name = "buddy",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("BUDDY_COMMIT"), ")"),
    // Plain words: the man page's NAME line and `--help` show them as they are (the
    // package description is written for crates.io, in Markdown).
    about = "an LLM agent runtime whose every turn ends, quickly, with an answer and a stated reason",
    long_about
)]
struct Cli {
    /// Config file (default: ./buddy.toml when it exists).
    #[arg(long, global = true, env = "BUDDY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log routing decisions to stderr (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one turn: answer text on stdout, tool calls, results and guards on stderr.
    Run(RunArgs),
    /// Talk to buddy interactively (Ctrl-C cancels a running turn; Ctrl-C or Ctrl-D at the prompt quits).
    Chat(ChatArgs),
    /// Run every scenario in a directory and show how each turn ended.
    Demo(DemoArgs),
    /// Serve the SSE chat API and an OpenAI-compatible endpoint over HTTP.
    Serve(ServeArgs),
    /// Serve the scripted scenarios as an OpenAI-compatible model (for testing any agent).
    MockServer(MockServerArgs),
    /// Measure loop efficiency over the full HTTP path.
    Bench(BenchArgs),
    /// Check the configuration and probe a provider: streaming, tool calls, tool_choice,
    /// content: null; prints the compat switches to add.
    Doctor(DoctorArgs),
    /// MCP servers of buddy.toml: `buddy mcp list` shows each one's state and tools.
    Mcp(McpArgs),
    /// Replay recorded turns under another policy, without calling the model or any tool:
    /// what happened beside what the policy would have done (exit 1 when a stop changes).
    Replay(ReplayArgs),
    /// Judge recorded conversations of any agent (OpenAI Chat messages, JSON or JSONL)
    /// under a policy, executing nothing: where buddy would have stopped each run, and why.
    Judge(commands::JudgeArgs),
    /// Write a commented buddy.toml to start from, with the provider filled in when a
    /// local model server or an API key is found.
    Init(commands::InitArgs),
    /// Print a completion script for a shell (`buddy completions bash > /etc/bash_completion.d/buddy`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print buddy's man page in roff (`buddy man > buddy.1; man ./buddy.1`).
    Man,
}

/// Prints what `completions` and `man` make from the command line's own definitions.
fn describe(command: &Command) -> Option<std::io::Result<()>> {
    let mut stdout = std::io::stdout();
    match command {
        Command::Completions { shell } => {
            clap_complete::generate(*shell, &mut Cli::command(), "buddy", &mut stdout);
            Some(Ok(()))
        }
        Command::Man => Some(clap_mangen::Man::new(Cli::command()).render(&mut stdout)),
        _ => None,
    }
}

fn init_logging(verbose: u8, format: LogFormat) {
    let default = match verbose {
        // rmcp logs every MCP connection it drops (a 401 before authorizing, a server
        // that stopped, a sink it could not close as the process ends) as an error; buddy
        // reports those itself, saying what to do.
        0 => "warn,rmcp::transport::worker=off,rmcp::service=off",
        1 => {
            "warn,buddy_engine=debug,buddy_skills=debug,buddy_providers=debug,buddy_cli=debug,buddy_mcp=debug"
        }
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a person at a terminal (and never with NO_COLOR set).
    use std::io::IsTerminal;
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Exit code of a process whose reader went away (128 + SIGPIPE, as shells report it).
const BROKEN_PIPE_EXIT: i32 = 141;

/// `buddy demo | head -1`: a reader that goes away ends buddy quietly, not with a panic.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if text.contains("Broken pipe") {
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        default(info);
    }));
}

/// An error and its causes, each said once: many of buddy's errors already quote their
/// cause, and anyhow's `{:#}` would repeat it.
fn report(error: &anyhow::Error) -> String {
    let mut out = error.to_string();
    for cause in error.chain().skip(1) {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let cli = Cli::parse();
    if let Some(written) = describe(&cli.command) {
        return match written {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                ExitCode::from(BROKEN_PIPE_EXIT as u8)
            }
            Err(e) => {
                eprintln!("error: cannot write to stdout: {e}");
                ExitCode::from(1)
            }
        };
    }
    init_logging(cli.verbose, cli.log_format);
    // Skills and MCP servers run as this user: they must not read its API keys.
    if let Err(e) = buddy_skills::hide_own_environment() {
        tracing::warn!(error = %e, "could not hide buddy's environment from the programs it starts");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let config = cli.config.as_deref();
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => commands::run(config, args).await,
            Command::Chat(args) => commands::chat(config, args).await,
            Command::Demo(args) => commands::demo(args).await,
            Command::Serve(args) => commands::serve(config, args).await,
            Command::MockServer(args) => commands::mock_server(args).await,
            Command::Bench(args) => commands::bench(args).await,
            Command::Doctor(args) => commands::doctor(config, args).await,
            Command::Mcp(args) => commands::mcp(config, args).await,
            Command::Replay(args) => commands::replay(config, args).await,
            Command::Judge(args) => commands::judge(config, args).await,
            Command::Init(args) => commands::init(args).await,
            // Answered before the runtime started.
            Command::Completions { .. } | Command::Man => Ok(0),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {}", report(&e));
            ExitCode::from(2)
        }
    }
}
