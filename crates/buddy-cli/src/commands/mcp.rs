//! `buddy mcp list`: each `[[mcp]]` server's state, tools, resources and prompts;
//! `buddy mcp read` / `buddy mcp prompt`: a resource's text, a prompt filled in;
//! `buddy mcp import`: another client's servers as `[[mcp]]` entries;
//! `buddy mcp login` / `logout`: an HTTP server's OAuth authorization, kept or forgotten.

use buddy_cli::config::expand_home;
use buddy_cli::runtime::Runtime;
use buddy_engine::ApprovalRules;
use std::path::Path;

use buddy_core::Skill;
use buddy_mcp::{McpSkill, McpSource, ServerState};
use clap::{Args, Subcommand};

/// `buddy mcp`.
#[derive(Args, Debug)]
pub struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
}

#[derive(Subcommand, Debug)]
enum McpCommand {
    /// Start each [[mcp]] server of buddy.toml and show its state and tools: the names
    /// the model calls them by, their repeat semantics and whether a call asks first.
    List,
    /// Print the servers of an MCP client's configuration (Claude Desktop, Cursor, Claude
    /// Code, VS Code) as [[mcp]] entries for buddy.toml; those buddy cannot run (legacy
    /// SSE…) are named on stderr with the reason.
    Import {
        /// The client's JSON file (`claude_desktop_config.json`, `.cursor/mcp.json`, …).
        file: std::path::PathBuf,
    },
    /// Print the text of a resource of an [[mcp]] server (its URI as `buddy mcp list`
    /// shows it).
    Read {
        /// The server's name in buddy.toml.
        server: String,
        /// The resource's URI.
        uri: String,
    },
    /// Print a prompt of an [[mcp]] server, filled in with NAME=VALUE arguments: each
    /// message's text, user messages first in a turn's order. Pipe it to `buddy run`:
    /// `buddy run "$(buddy mcp prompt docs summarize topic=MCP)"`.
    Prompt {
        /// The server's name in buddy.toml.
        server: String,
        /// The prompt's name.
        name: String,
        /// Its arguments, each NAME=VALUE.
        arguments: Vec<String>,
    },
    /// Authorize buddy to an HTTP [[mcp]] server that asks for OAuth: open the address it
    /// prints in a browser and approve; the token is kept (and refreshed) for every later
    /// run, `buddy serve` included (see `mcp_tokens`).
    Login {
        /// The server's name in buddy.toml.
        server: String,
    },
    /// Forget the OAuth token kept for an HTTP [[mcp]] server.
    Logout {
        /// The server's name in buddy.toml.
        server: String,
    },
    /// The client the official MCP conformance suite drives (scripts/mcp-conformance.sh).
    #[command(hide = true)]
    ConformanceClient {
        /// The scenario server's URL, as the suite appends it.
        url: String,
    },
}

/// Runs `buddy mcp list` (exit 0 when every server started, 1 when one did not; the
/// servers of `mcp_import` files buddy cannot run are listed with the reason) or
/// `buddy mcp import FILE` (the servers it can run as TOML, the others on stderr with
/// the reason).
pub async fn mcp(config_path: Option<&Path>, args: McpArgs) -> anyhow::Result<u8> {
    if let McpCommand::Import { file } = &args.command {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let file = expand_home(file, home.as_deref()).map_err(anyhow::Error::msg)?;
        let shown = file.display().to_string();
        let text = std::fs::read_to_string(&file)
            .map_err(|e| anyhow::anyhow!("cannot read {shown}: {e}"))?;
        let imported = buddy_mcp::import_mcp_servers(&text, &shown)?;
        print!("{}", buddy_mcp::to_toml(&imported.servers));
        eprintln!(
            "buddy: {} server(s) from {shown}; add them to buddy.toml, or keep the file and set mcp_import = [{:?}]",
            imported.servers.len(),
            shown
        );
        for skipped in &imported.skipped {
            eprintln!("buddy: skipped `{}`: {}", skipped.name, skipped.reason);
        }
        return Ok(0);
    }
    if let McpCommand::ConformanceClient { url } = &args.command {
        return super::mcp_conformance::conformance_client(url).await;
    }
    let runtime = Runtime::load(config_path)?;
    let config = runtime.config();
    if let McpCommand::Login { server } = &args.command {
        return login(named(config, server)?).await;
    }
    if let McpCommand::Logout { server } = &args.command {
        let source = McpSource::new(named(config, server)?);
        source.logout().await?;
        println!("buddy: forgot the OAuth token of MCP server `{server}`");
        return Ok(0);
    }
    if let McpCommand::Read { server, uri } = &args.command {
        let source = McpSource::new(named(config, server)?);
        let text = source.read_resource(uri).await?;
        println!("{text}");
        return Ok(0);
    }
    if let McpCommand::Prompt {
        server,
        name,
        arguments,
    } = &args.command
    {
        let source = McpSource::new(named(config, server)?);
        let mut given = serde_json::Map::new();
        for pair in arguments {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| anyhow::anyhow!("prompt argument `{pair}` is not NAME=VALUE"))?;
            given.insert(key.to_owned(), serde_json::Value::String(value.to_owned()));
        }
        let messages = source.get_prompt(name, given).await?;
        let texts: Vec<&str> = messages.iter().map(|(_, text)| text.as_str()).collect();
        println!("{}", texts.join("\n\n"));
        return Ok(0);
    }
    if config.mcp.is_empty() && config.mcp_skipped.is_empty() {
        println!("No MCP servers: add an [[mcp]] entry to buddy.toml (see docs/guide/mcp.md).");
        return Ok(0);
    }
    let rules = config.approval.rules(None, false);
    let mut failed = 0;
    for server in &config.mcp {
        failed += usize::from(!show_server(server, &rules).await);
    }
    // Not counted as failures: buddy.toml is fine, the other client's file has servers
    // buddy cannot run.
    for skipped in &config.mcp_skipped {
        println!(
            "{}  (from {})\n  skipped: {}",
            skipped.name, skipped.origin, skipped.reason
        );
    }
    Ok(u8::from(failed > 0))
}

/// Lists one `[[mcp]]` server for `buddy mcp list`: its state, its tools (how each asks,
/// which run as tasks, which are left out and why) and its catalog; false when it could
/// not be reached.
async fn show_server(server: &buddy_mcp::McpServerConfig, rules: &ApprovalRules) -> bool {
    let source = McpSource::new(server.clone());
    let where_ = match &server.url {
        Some(url) => url.clone(),
        None => server.command_line(),
    };
    match McpSkill::all(std::sync::Arc::clone(&source)).await {
        Ok(skills) => {
            let running = match source.state() {
                ServerState::Running { server, protocol } => {
                    format!("running: {server}, protocol {protocol}")
                }
                other => format!("{other:?}"),
            };
            println!(
                "{}  ({where_})\n  {running}; {} tool(s)",
                server.name,
                skills.len()
            );
            for (tool, why) in source.left_out() {
                println!("    {tool:<40} left out: {why}");
            }
            let as_tasks: Vec<String> = source
                .task_only_tools()
                .iter()
                .map(|tool| server.skill_name(tool))
                .collect();
            for skill in &skills {
                let semantics = skill.semantics();
                let asks = if rules.needs_approval(skill.name(), semantics).is_some() {
                    "asks first"
                } else {
                    "runs without asking"
                };
                let task = match as_tasks.iter().any(|t| t == skill.name()) {
                    true => ", runs as a task",
                    false => "",
                };
                println!(
                    "    {:<40} {:<10} {asks}{task}",
                    skill.name(),
                    format!("{semantics:?}").to_lowercase()
                );
            }
            show_catalog(&source).await;
        }
        Err(e) => {
            println!("{}  ({where_})\n  not available: {e}", server.name);
            return false;
        }
    }
    true
}

/// `buddy mcp login SERVER`: connects, sending the person to the browser when the
/// server asks for authorization; says where the token is kept.
async fn login(entry: buddy_mcp::McpServerConfig) -> anyhow::Result<u8> {
    let name = entry.name.clone();
    if entry.url.is_none() {
        anyhow::bail!(
            "MCP server `{name}` is a stdio server: only HTTP servers ask for OAuth authorization"
        );
    }
    let source = McpSource::new(entry);
    source.set_browser(std::sync::Arc::new(buddy_mcp::TerminalBrowser));
    let kept = source.login().await?;
    match kept {
        Some(path) => println!(
            "buddy: MCP server `{name}` is reachable; its OAuth token (if it asked for one) is kept in {}",
            path.display()
        ),
        None => println!(
            "buddy: MCP server `{name}` is reachable; its OAuth token lives for this run only (no home directory: set mcp_tokens)"
        ),
    }
    Ok(0)
}

/// The `[[mcp]]` entry named `server`, offered the sandbox as its roots.
fn named(
    config: &buddy_cli::config::BuddyConfig,
    server: &str,
) -> anyhow::Result<buddy_mcp::McpServerConfig> {
    let mut entry = config
        .mcp
        .iter()
        .find(|s| s.name == server)
        .cloned()
        .ok_or_else(|| {
            let names: Vec<&str> = config.mcp.iter().map(|s| s.name.as_str()).collect();
            anyhow::anyhow!(
                "no [[mcp]] server `{server}` in buddy.toml (its servers: {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            )
        })?;
    entry.sandbox = match &config.skills.sandbox {
        Some(sandbox) => Some(sandbox.clone()),
        None => Some(std::env::current_dir()?),
    };
    Ok(entry)
}

/// The resources and prompts of a running server, under its tools.
async fn show_catalog(source: &McpSource) {
    match source.list_resources().await {
        Ok(resources) if !resources.is_empty() => {
            println!(
                "  {} resource(s): `buddy mcp read {} URI`",
                resources.len(),
                source.config().name
            );
            for resource in &resources {
                println!("    {:<40} {}", resource.uri, resource.name);
            }
        }
        Ok(_) => {}
        Err(e) => println!("  resources: {e}"),
    }
    match source.list_prompts().await {
        Ok(prompts) if !prompts.is_empty() => {
            println!(
                "  {} prompt(s): `buddy mcp prompt {} NAME [ARG=VALUE…]`",
                prompts.len(),
                source.config().name
            );
            for prompt in &prompts {
                let arguments: Vec<String> = prompt
                    .arguments
                    .iter()
                    .map(|a| {
                        if a.required {
                            a.name.clone()
                        } else {
                            format!("[{}]", a.name)
                        }
                    })
                    .collect();
                println!(
                    "    {:<40} {}",
                    format!("{} {}", prompt.name, arguments.join(" ")).trim_end(),
                    prompt.description
                );
            }
        }
        Ok(_) => {}
        Err(e) => println!("  prompts: {e}"),
    }
}
