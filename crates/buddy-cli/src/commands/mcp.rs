//! `buddy mcp list`: each `[[mcp]]` server's state and tools; `buddy mcp import`: another
//! client's servers as `[[mcp]]` entries.

use buddy_cli::config::expand_home;
use buddy_cli::runtime::Runtime;
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
    let runtime = Runtime::load(config_path)?;
    let config = runtime.config();
    if config.mcp.is_empty() && config.mcp_skipped.is_empty() {
        println!(
            "No MCP servers: add an [[mcp]] entry to buddy.toml (see README: \"Tools from MCP servers\")."
        );
        return Ok(0);
    }
    let rules = config.approval.rules(None, false);
    let mut failed = 0;
    for server in &config.mcp {
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
                for skill in &skills {
                    let semantics = skill.semantics();
                    let asks = if rules.needs_approval(skill.name(), semantics).is_some() {
                        "asks first"
                    } else {
                        "runs without asking"
                    };
                    println!(
                        "    {:<40} {:<10} {asks}",
                        skill.name(),
                        format!("{semantics:?}").to_lowercase()
                    );
                }
            }
            Err(e) => {
                failed += 1;
                println!("{}  ({where_})\n  not available: {e}", server.name);
            }
        }
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
