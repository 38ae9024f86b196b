//! `buddy serve`: the SSE chat API and the OpenAI-compatible endpoint.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use buddy_cli::config::OpenAiApproval;
use buddy_cli::runtime::Runtime;
use buddy_engine::ApprovalRules;
use buddy_server::AppState;
use buddy_store::OpenedStore;
use clap::Args;

use super::server_flags::ServerFlags;
use super::wiring::process_env;

/// `buddy serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    // `[server]` settings with a flag in the settings table: --listen, --db, --store
    // ($BUDDY_STORE), --max-body-bytes, --max-concurrent-turns, --shutdown-grace-secs.
    #[command(flatten)]
    server: ServerFlags,
    /// Directory the file skills are confined to (default: config, else the current directory).
    #[arg(long, value_name = "DIR")]
    sandbox: Option<PathBuf>,
    /// An accepted API key (repeatable). Visible to every local user and to every program
    /// buddy starts (`ps`, /proc/<pid>/cmdline): prefer $BUDDY_API_KEYS or --api-key-file.
    #[arg(long = "api-key", value_name = "KEY")]
    api_keys: Vec<String>,
    /// A file of accepted API keys, one a line (`#` starts a comment); repeatable. Keys
    /// stay off the command line, where anyone on the machine could read them.
    #[arg(long = "api-key-file", value_name = "FILE")]
    api_key_files: Vec<PathBuf>,
    /// Directory of scenarios served as `scripted:<name>` models (default: ./scenarios).
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
    /// A file whose first line is the store's URL (`postgres://user:password@…`): the
    /// password stays off the command line, where anyone on the machine could read it.
    /// It wins over --store and $BUDDY_STORE.
    #[arg(long = "store-file", value_name = "FILE")]
    store_file: Option<PathBuf>,
}

/// Runs the server until SIGTERM or Ctrl-C.
pub async fn serve(config_path: Option<&Path>, args: ServeArgs) -> anyhow::Result<u8> {
    let mut runtime = Runtime::load(config_path)?;
    super::wiring::warn_skipped_mcp(&runtime);
    let env_patch = runtime.env_policy(std::env::vars())?;
    runtime.config_mut().policy.base.merge(&env_patch);
    args.server.apply(&mut runtime.config_mut().server)?;
    if let Some(url) = args.server.on_command_line("store") {
        super::store_flags::warn_if_password_shown(url);
    }
    if let Some(file) = &args.store_file {
        runtime.config_mut().server.store = Some(super::store_flags::store_from_file(file)?);
    }
    let config = runtime.config();
    let mut settings = config.server.clone();
    let mut given = args.api_keys.clone();
    if !given.is_empty() {
        eprintln!(
            "buddy: WARNING: --api-key puts the key on the command line, where every local user \
             and every program buddy starts can read it (ps, /proc/<pid>/cmdline); give keys \
             with $BUDDY_API_KEYS or --api-key-file FILE instead"
        );
    }
    for file in &args.api_key_files {
        given.extend(keys_from_file(file)?);
    }
    settings.api_keys = settings.accepted_keys(&given, &|var| std::env::var(var).ok())?;
    // `/v1/chat` pauses for approval; the OpenAI endpoints cannot resume, so they refuse
    // such calls (the model reads why) unless the operator lets them run.
    settings.approval = config.approval.rules(None, false);
    settings.openai_approval = match config.approval.openai_endpoints {
        OpenAiApproval::Refuse => config.approval.rules(None, true),
        OpenAiApproval::Run => ApprovalRules::default(),
    };
    settings.prices = runtime.price_table();
    settings.telemetry = runtime.telemetry(&process_env)?;
    open_files_for(settings.max_connections.max(1));
    super::return_large_buffers();
    let listen = settings.listen.clone();
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    // Refused before anything is created or announced.
    if !addr.ip().is_loopback() && settings.api_keys.is_empty() {
        anyhow::bail!(
            "refusing to listen on {addr} without auth: set api keys (--api-key, BUDDY_API_KEYS, [server] api_keys_env or [[server.keys]]) or listen on 127.0.0.1"
        );
    }
    let location = runtime
        .store_location(None, None)
        .context("--store / [server] store")?;
    let OpenedStore {
        store,
        coordinator,
        shown,
    } = location.open().await?;
    let (sandbox_dir, sandbox) = runtime.sandbox(args.sandbox.as_deref())?;
    let scenarios = args
        .scenarios
        .clone()
        .unwrap_or_else(|| PathBuf::from("scenarios"));
    let backend = runtime
        .server_backend(sandbox, Some(&scenarios), &process_env)
        .await?;
    let settings_grace = settings.shutdown_grace;
    let settings_telemetry = settings.telemetry.clone();
    let state = AppState::shared(
        store,
        coordinator,
        Arc::new(backend),
        config.policy.clone(),
        settings,
    );
    // Listening for signals before saying "serving": a SIGTERM right after is graceful too.
    let signal = super::signals::shutdown()?;
    eprintln!(
        "buddy serving on http://{addr} (store {shown}, sandbox {})",
        sandbox_dir.display()
    );
    let grace = settings_grace;
    let announced = async move {
        signal.await;
        eprintln!(
            "buddy: shutting down; running turns have {} s to finish (Ctrl-C again does not hurry it)",
            grace.as_secs_f64()
        );
    };
    let telemetry = settings_telemetry;
    buddy_server::serve(state, listener, announced).await?;
    if let Some(telemetry) = telemetry {
        telemetry.shutdown().await;
    }
    eprintln!("buddy: stopped; every turn is recorded");
    Ok(0)
}

/// The keys in `file`: one a line, blank lines and `#` comments skipped. A file others
/// may read is used, with a warning.
fn keys_from_file(file: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("--api-key-file {}: cannot read it", file.display()))?;
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(file) {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            eprintln!(
                "buddy: warning: --api-key-file {}: other users may read it; chmod 600 it",
                file.display()
            );
        }
    }
    let keys: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect();
    if keys.is_empty() {
        anyhow::bail!(
            "--api-key-file {}: no key in it (one key a line)",
            file.display()
        );
    }
    Ok(keys)
}

/// Raises the soft limit on open files to the hard one: each connection holds one, and a
/// soft limit of 1,024 (a common default) would run out before `max_connections` does.
fn open_files_for(max_connections: usize) {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Nofile);
        if limit.current < limit.maximum {
            let raised = Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            };
            if let Err(e) = setrlimit(Resource::Nofile, raised) {
                tracing::warn!(error = %e, "could not raise the open-file limit");
            }
        }
        let now = getrlimit(Resource::Nofile).current;
        // Connections, the store, MCP servers, skills: leave room beside the connections.
        if let Some(files) = now
            && files < max_connections as u64 + 64
        {
            tracing::warn!(
                open_files = files,
                max_connections,
                "the open-file limit is below max_connections + 64: raise `ulimit -n` or lower [server] max_connections"
            );
        }
    }
    #[cfg(not(unix))]
    let _ = max_connections;
}
