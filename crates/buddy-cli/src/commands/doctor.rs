//! `buddy doctor`: checks the configuration, then probes a provider and prints the
//! compat switches it needs.

use std::path::{Path, PathBuf};

use anyhow::Context;
use buddy_cli::doctor::probe;
use buddy_cli::doctor_files::PrivateFiles;
use buddy_cli::provider_kinds::Chosen;
use buddy_cli::runtime::Runtime;
use buddy_cli::toolbox::build_registry;
use buddy_store::StoreLocation;
use clap::Args;

use super::ProviderFlags;

/// `buddy doctor`.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    #[command(flatten)]
    target: ProviderFlags,
    /// Model to probe (default: `model` of the provider in buddy.toml).
    #[arg(long)]
    model: Option<String>,
    /// Directory the file skills are confined to (default: config, else the current directory).
    #[arg(long, value_name = "DIR")]
    sandbox: Option<PathBuf>,
}

/// Exit code when the provider needs a change or does not work.
const NEEDS_CHANGES: u8 = 1;

/// Runs the checks; 0 when all pass as configured, 1 when something must change, 2 for
/// a configuration that does not load.
pub async fn doctor(config_path: Option<&Path>, args: DoctorArgs) -> anyhow::Result<u8> {
    let source = match config_path {
        Some(path) => path.display().to_string(),
        None if Path::new("buddy.toml").is_file() => "./buddy.toml".to_owned(),
        None => "no buddy.toml (built-in defaults)".to_owned(),
    };
    let runtime = Runtime::load(config_path)?;
    let config = runtime.config();
    let (sandbox_dir, sandbox) = runtime.sandbox(args.sandbox.as_deref())?;
    let registry = build_registry(&config.skills, &sandbox, None)?;
    config
        .policy
        .resolve(args.model.as_deref().unwrap_or(""), &[])
        .context("policy")?;
    println!("config    {source}: ok");
    println!(
        "providers {}",
        if config.providers.is_empty() {
            "none declared (the scripted model)".to_owned()
        } else {
            config
                .providers
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    println!(
        "skills    {} in sandbox {} ({:?} resolution)",
        registry.names().join(", "),
        sandbox_dir.display(),
        sandbox.resolution()
    );

    let programs = buddy_skills::ChildPrivileges::for_run_as(config.skills.run_as.as_ref());
    println!(
        "programs  command skills and MCP servers run as {}",
        programs.describe()
    );
    if programs.keeps_root() {
        println!(
            "          ! buddy runs as root: they cannot read its environment or memory, but they \
             own root's files (buddy.toml, the store); set [skills] run_as = \"nobody\" (or another \
             unprivileged user) to keep those from them"
        );
    }
    let files_ok = check_private_files(&runtime, config_path);
    // All run, so every problem is listed at once.
    let (mcp_ok, mcp_tools) = check_mcp_servers(&config.mcp).await;
    let agents_ok = check_agents(config, &registry.names(), &mcp_tools);
    let checks_ok = mcp_ok && files_ok && agents_ok;
    for skipped in &config.mcp_skipped {
        println!(
            "mcp       {}: skipped (from {}): {}",
            skipped.name, skipped.origin, skipped.reason
        );
    }
    let Chosen {
        name,
        config: chosen,
    } = runtime.choose(&args.target.choice())?;
    if let Some(why) = runtime.backends().get(chosen.kind)?.nothing_to_probe() {
        println!("provider  {why}");
        return Ok(if checks_ok { 0 } else { NEEDS_CHANGES });
    }
    let model = args.model.clone().or_else(|| chosen.model.clone()).with_context(|| {
        format!("provider `{name}` needs a model to probe: pass --model or set `model` under [providers.{name}]")
    })?;
    // Shown without the credentials a base_url may carry.
    let url = buddy_providers::redact_url(
        chosen
            .base_url
            .as_deref()
            .unwrap_or(chosen.kind.default_base_url()),
    );
    println!(
        "provider  {name} ({} at {url}), model {model}",
        chosen.kind.as_str()
    );
    println!("          probing with a few small model calls…");
    let env = |var: &str| std::env::var(var).ok();
    let report = probe(&name, &chosen, &model, &env).await;
    for check in &report.checks {
        let mark = if check.ok { "✓" } else { "✗" };
        println!("  {mark} {}: {}", check.what, check.detail);
    }
    if let Some(fatal) = &report.fatal {
        println!("  ✗ {fatal}");
        return Ok(NEEDS_CHANGES);
    }
    if report.healthy() {
        println!("ok: `{name}` streams, calls tools and takes tool results as configured");
        return Ok(if checks_ok { 0 } else { NEEDS_CHANGES });
    }
    if !report.switches.is_empty() {
        let declared = config.providers.contains_key(&name);
        let mut shown = chosen.clone();
        shown.model = Some(model.clone());
        println!("\nAdd to buddy.toml:\n");
        for line in report.toml_to_add(&name, declared, &shown).lines() {
            if line.is_empty() {
                println!();
            } else {
                println!("  {line}");
            }
        }
        let flags: Vec<&str> = report.switches.iter().map(|s| s.flag()).collect();
        println!("\nor pass, for one run: {}", flags.join(" "));
    }
    Ok(NEEDS_CHANGES)
}

/// Names every file only buddy should read (the SQLite store and its journal files, the
/// MCP token directory and tokens, a buddy.toml with the store's password) that other
/// users may read. True when there is none.
fn check_private_files(runtime: &Runtime, config_path: Option<&Path>) -> bool {
    let config = runtime.config();
    let from_env = std::env::var("BUDDY_STORE").ok();
    let location = runtime.store_location(from_env.as_deref(), None).ok();
    let sqlite = match &location {
        Some(StoreLocation::Sqlite(db)) => Some(db.clone()),
        _ => None,
    };
    let secret_in_config = config
        .server
        .store
        .as_deref()
        .and_then(|url| StoreLocation::parse(url).ok())
        .is_some_and(|l| l.names_password());
    let config_file = config_path
        .map(Path::to_owned)
        .or_else(|| Some(PathBuf::from("buddy.toml")))
        .filter(|_| secret_in_config);
    let token_dir = config.mcp_token_dir();
    let files = PrivateFiles {
        sqlite: sqlite.as_deref(),
        token_dir: token_dir.as_deref(),
        config_with_secret: config_file.as_deref(),
    };
    let open = files.open_to_others();
    if open.is_empty() {
        println!("files     the store and the tokens it keeps are readable by buddy's user only");
        return true;
    }
    for file in &open {
        println!("files     {}", file.warning());
    }
    false
}

/// Checks every `[[agents]]` declaration against the skills and the MCP servers' tools
/// (`mcp`: each server's name and its tools, `None` when it did not start), one line per
/// agent and per problem. True when every agent is usable as declared.
fn check_agents(
    config: &buddy_cli::config::BuddyConfig,
    skills: &[&str],
    mcp: &[(String, Option<Vec<String>>)],
) -> bool {
    use buddy_cli::doctor_agents::{Known, check_agents};
    let mut known = Known {
        tools: skills.to_vec(),
        unlisted_servers: Vec::new(),
    };
    for (server, tools) in mcp {
        match tools {
            Some(tools) => known.tools.extend(tools.iter().map(String::as_str)),
            None => known.unlisted_servers.push(server),
        }
    }
    let mut ok = true;
    for found in check_agents(&config.agents, &config.providers, &known) {
        if found.problems.is_empty() {
            println!("agents    {}: ok", found.name);
        }
        for problem in &found.problems {
            ok = false;
            println!("agents    {}: ✗ {problem}", found.name);
        }
    }
    ok
}

/// Starts every `[[mcp]]` server and lists its tools, one line each; a server that does
/// not start is named with its error and what it printed. True when all started, with
/// each server's tools (`None` for one that did not start).
async fn check_mcp_servers(
    servers: &[buddy_mcp::McpServerConfig],
) -> (bool, Vec<(String, Option<Vec<String>>)>) {
    let mut ok = true;
    let mut listed = Vec::new();
    for server in servers {
        let source = buddy_mcp::McpSource::new(server.clone());
        match buddy_mcp::McpSkill::all(std::sync::Arc::clone(&source)).await {
            Ok(skills) => {
                let names: Vec<&str> = skills
                    .iter()
                    .map(|s| buddy_core::Skill::name(&**s))
                    .collect();
                println!(
                    "mcp       {}: ok, {} tool(s): {}",
                    server.name,
                    names.len(),
                    names.join(", ")
                );
                let names = names.into_iter().map(str::to_owned).collect();
                listed.push((server.name.clone(), Some(names)));
                continue;
            }
            Err(e) if !server.required => println!(
                "mcp       {}: ! {e} (not required: buddy starts without it and tries it again in the background)",
                server.name
            ),
            Err(e) => {
                ok = false;
                println!("mcp       {}: ✗ {e}", server.name);
            }
        }
        listed.push((server.name.clone(), None));
    }
    (ok, listed)
}
