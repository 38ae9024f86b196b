//! `buddy serve`: the SSE chat API and the OpenAI-compatible endpoint.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use buddy_cli::config::OpenAiApproval;
use buddy_cli::runtime::Runtime;
use buddy_engine::ApprovalRules;
use buddy_server::{ApiKey, AppState, ServerSettings, SpendCeiling};
use buddy_store::OpenedStore;
use clap::Args;

use super::wiring::process_env;

/// `buddy serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (default: [server] listen, else 127.0.0.1:8080; port 0 picks one).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// SQLite file of the conversation store, created on first run (default: [server] db, else ./buddy.db).
    #[arg(long, value_name = "FILE")]
    db: Option<PathBuf>,
    /// A postgres:// URL: keep conversations in PostgreSQL, shared with every instance
    /// given the same URL (default: [server] store; else the SQLite file).
    #[arg(long, value_name = "URL", env = "BUDDY_STORE")]
    store: Option<String>,
    /// Directory the file skills are confined to (default: config, else the current directory).
    #[arg(long, value_name = "DIR")]
    sandbox: Option<PathBuf>,
    /// An accepted API key (repeatable); also read from $BUDDY_API_KEYS, comma-separated.
    #[arg(long = "api-key", value_name = "KEY")]
    api_keys: Vec<String>,
    /// Directory of scenarios served as `scripted:<name>` models (default: ./scenarios).
    #[arg(long, value_name = "DIR")]
    scenarios: Option<PathBuf>,
    /// Largest request body in bytes.
    #[arg(long, value_name = "BYTES")]
    max_body_bytes: Option<usize>,
    /// Turns one API key may run at once.
    #[arg(long, value_name = "N")]
    max_concurrent_turns: Option<usize>,
    /// Seconds running turns may go on after SIGTERM/Ctrl-C before they are cancelled.
    #[arg(long, value_name = "SECS")]
    shutdown_grace_secs: Option<f64>,
}

/// Runs the server until SIGTERM or Ctrl-C.
pub async fn serve(config_path: Option<&Path>, args: ServeArgs) -> anyhow::Result<u8> {
    let mut runtime = Runtime::load(config_path)?;
    let env_patch = runtime.env_policy(std::env::vars())?;
    runtime.config_mut().policy.base.merge(&env_patch);
    let config = runtime.config();
    let server = &config.server;
    let api_keys = api_keys(server, &args.api_keys, &|var| std::env::var(var).ok())?;
    let secs = |value: f64, what: &str| {
        Duration::try_from_secs_f64(value)
            .with_context(|| format!("{what} must be a number of seconds"))
    };
    let settings = ServerSettings {
        api_keys,
        max_body_bytes: args.max_body_bytes.unwrap_or(server.max_body_bytes),
        max_concurrent_turns_per_key: args
            .max_concurrent_turns
            .unwrap_or(server.max_concurrent_turns_per_key)
            .max(1),
        shutdown_grace: secs(
            args.shutdown_grace_secs
                .unwrap_or(server.shutdown_grace_secs),
            "--shutdown-grace-secs",
        )?,
        allow_loop_detection_off: server.allow_loop_detection_off,
        allow_request_mcp: server.allow_request_mcp,
        max_connections: server.max_connections.max(1),
        max_connections_per_address: server.max_connections_per_address,
        header_timeout: secs(server.header_timeout_secs, "[server] header_timeout_secs")?,
        body_timeout: secs(server.body_timeout_secs, "[server] body_timeout_secs")?,
        websocket_idle_timeout: secs(server.websocket_idle_secs, "[server] websocket_idle_secs")?,
        responses_skill_calls: server.responses_skill_calls,
        cancel_on_disconnect: server.cancel_on_disconnect,
        turn_events_grace: secs(
            server.turn_events_grace_secs,
            "[server] turn_events_grace_secs",
        )?,
        // `/v1/chat` pauses for approval; the OpenAI endpoints cannot resume, so they
        // refuse such calls (the model reads why) unless the operator lets them run.
        approval: config.approval.rules(None, false),
        openai_approval: match config.approval.openai_endpoints {
            OpenAiApproval::Refuse => config.approval.rules(None, true),
            OpenAiApproval::Run => ApprovalRules::default(),
        },
        prices: runtime.price_table(),
        telemetry: runtime.telemetry(&process_env)?,
        max_daily_cost_usd: server.max_daily_cost_usd,
        max_monthly_cost_usd: server.max_monthly_cost_usd,
        ..ServerSettings::default()
    };
    open_files_for(settings.max_connections);
    return_large_buffers();
    let listen = args.listen.clone().unwrap_or_else(|| server.listen.clone());
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
        .store_location(args.store.as_deref(), args.db.as_deref())
        .context("--store / [server] store")?;
    let OpenedStore {
        store,
        coordinator,
        shown,
    } = location.open().await?;
    let (_, sandbox) = runtime.sandbox(args.sandbox.as_deref())?;
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
    eprintln!("buddy serving on http://{addr} (store {shown})");
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

/// Every accepted key: the unnamed ones (`--api-key`, `$BUDDY_API_KEYS`) and the named
/// `[[server.keys]]`, each by its environment variable or its hash.
pub fn api_keys(
    server: &buddy_cli::config::ServerConfig,
    flags: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Vec<ApiKey>> {
    let mut keys: Vec<ApiKey> = flags.iter().map(|k| ApiKey::new(k, None, false)).collect();
    if let Some(listed) = env(&server.api_keys_env) {
        keys.extend(
            listed
                .split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(|k| ApiKey::new(k, None, false)),
        );
    }
    for declared in &server.keys {
        let name = &declared.name;
        let key = match (&declared.key_env, &declared.key_sha256) {
            (Some(var), None) => match env(var).filter(|k| !k.trim().is_empty()) {
                Some(key) => ApiKey::new(&key, Some(name), declared.admin),
                None => anyhow::bail!(
                    "[[server.keys]] `{name}`: environment variable {var} is not set; set it to the key, or give key_sha256 instead"
                ),
            },
            (None, Some(hash)) => ApiKey::from_sha256(hash, name, declared.admin)?,
            _ => anyhow::bail!(
                "[[server.keys]] `{name}`: give exactly one of key_env (the variable holding the key) or key_sha256"
            ),
        };
        let key = match (declared.max_daily_cost_usd, declared.max_monthly_cost_usd) {
            (None, None) => key,
            (daily, monthly) => key.with_spend(SpendCeiling { daily, monthly }),
        };
        if keys.iter().any(|k| k.name == key.name) {
            anyhow::bail!("[[server.keys]]: two keys are named `{name}`; names must differ");
        }
        keys.push(key);
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

/// Makes glibc serve every allocation of 256 KiB or more from a mapping of its own,
/// unmapped when freed. By default glibc raises that threshold after the first large
/// free (up to 32 MiB), and from then on a turn's megabytes of tool-call arguments come
/// from the heap and stay resident after the turn.
#[allow(unsafe_code)]
fn return_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator tunable; it takes plain integers and is
    // called once, before the server allocates anything large.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
}
