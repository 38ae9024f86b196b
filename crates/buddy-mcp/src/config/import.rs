//! MCP servers as the other MCP clients write them (Claude Desktop, Cursor, Claude Code:
//! `{"mcpServers": {"name": {"command", "args", "env"}}}`; VS Code: `{"servers": …}`),
//! read into buddy's `[[mcp]]` entries.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::config::server::McpServerConfig;

/// One server of such a file.
#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    cwd: Option<std::path::PathBuf>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// `stdio`, `http` / `streamable-http`, or `sse` (which buddy does not speak).
    #[serde(default, rename = "type")]
    kind: Option<String>,
    /// Claude Desktop's switch; a disabled server is left out.
    #[serde(default)]
    disabled: bool,
}

/// What an MCP client's configuration gives buddy: the servers it can run, and those it
/// cannot, each with the reason.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Imported {
    /// The servers buddy can run, in name order (disabled ones left out).
    pub servers: Vec<McpServerConfig>,
    /// The servers left out, in name order.
    pub skipped: Vec<SkippedServer>,
}

/// A server of an MCP client's configuration that buddy cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedServer {
    /// The file it comes from, as shown to people.
    pub origin: String,
    /// Its name in the file.
    pub name: String,
    /// Why buddy cannot run it, and what to do instead.
    pub reason: String,
}

impl std::fmt::Display for SkippedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MCP server `{}` of {} is skipped: {}",
            self.name, self.origin, self.reason
        )
    }
}

/// A file that is not an MCP client's configuration at all.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file is not JSON.
    #[error("{origin}: not JSON: {source}")]
    NotJson {
        origin: String,
        #[source]
        source: serde_json::Error,
    },
    /// The JSON has no servers object.
    #[error(
        "{origin}: no `mcpServers` (or `servers`) object: this is not an MCP client's configuration"
    )]
    NoServers { origin: String },
}

/// The servers of an MCP client's JSON configuration (`origin` names it in messages):
/// those buddy can run, and those it skips with the reason (a legacy SSE server, an
/// entry without `command` or `url`…), so one such server does not cost the others.
pub fn import_mcp_servers(text: &str, origin: &str) -> Result<Imported, ImportError> {
    let doc: Value = serde_json::from_str(text).map_err(|source| ImportError::NotJson {
        origin: origin.to_owned(),
        source,
    })?;
    let servers = doc
        .get("mcpServers")
        .or_else(|| doc.get("servers"))
        .and_then(Value::as_object)
        .ok_or_else(|| ImportError::NoServers {
            origin: origin.to_owned(),
        })?;
    let mut imported = Imported::default();
    let mut names: Vec<&String> = servers.keys().collect();
    names.sort();
    for name in names {
        match server_of(name, &servers[name]) {
            Ok(Some(config)) => imported.servers.push(config),
            Ok(None) => {}
            Err(reason) => imported.skipped.push(SkippedServer {
                origin: origin.to_owned(),
                name: name.clone(),
                reason,
            }),
        }
    }
    Ok(imported)
}

/// One entry as buddy's `[[mcp]]` entry; `None` when disabled; why not when buddy
/// cannot run it.
fn server_of(name: &str, value: &Value) -> Result<Option<McpServerConfig>, String> {
    let entry: Entry = serde_json::from_value(value.clone())
        .map_err(|e| format!("its entry is not one buddy can read: {e}"))?;
    if entry.disabled {
        return Ok(None);
    }
    // Cursor writes a legacy SSE server as a bare `url` ending in `/sse`, with no type.
    let sse_by_url = entry.kind.is_none()
        && entry.command.is_none()
        && entry.url.as_deref().is_some_and(|url| {
            url.split(['?', '#'])
                .next()
                .unwrap_or(url)
                .trim_end_matches('/')
                .ends_with("/sse")
        });
    let kind = if sse_by_url {
        Some("sse")
    } else {
        entry.kind.as_deref()
    };
    match kind {
        None | Some("stdio" | "http" | "streamable-http" | "streamableHttp") => {}
        // rmcp 3.9, buddy's MCP client, has no client for the 2024-11-05 HTTP+SSE transport.
        Some("sse") => {
            let how = match sse_by_url {
                true => {
                    "(its `url` ends in `/sse` and it names no type: Cursor's way of writing one)"
                }
                false => "(`\"type\": \"sse\"`)",
            };
            return Err(format!(
                "it uses the legacy SSE transport {how}, which buddy does not speak \
                 (Streamable HTTP and stdio only); if the server also serves Streamable HTTP \
                 (often at `/mcp` instead of `/sse`), add an [[mcp]] entry with that `url`"
            ));
        }
        Some(other) => {
            return Err(format!(
                "its transport `\"type\": \"{other}\"` is not one buddy speaks (stdio, or Streamable HTTP: `http`)"
            ));
        }
    }
    let mut config = McpServerConfig::stdio(name, &[]);
    // Another client's server that cannot start does not stop buddy (as there).
    config.required = false;
    match (entry.command, entry.url) {
        (Some(command), None) => {
            config.command = vec![command];
            config.args = entry.args;
        }
        (None, Some(url)) => config.url = Some(url),
        (Some(_), Some(_)) => {
            return Err(
                "it has both `command` and `url`; buddy cannot tell which to use".to_owned(),
            );
        }
        (None, None) => return Err("it has neither `command` nor `url`".to_owned()),
    }
    config.env = entry.env;
    config.cwd = entry.cwd;
    config.headers = entry.headers;
    let asks = config
        .args
        .iter()
        .chain(config.env.values())
        .chain(config.headers.values())
        .chain(&config.url)
        .any(|v| v.contains("${input:"));
    if asks {
        return Err(
            "it uses VS Code input variables (`${input:…}`), which only VS Code can ask for; \
             add it as an [[mcp]] entry with the values filled in (`headers_env` keeps a token out of buddy.toml)"
                .to_owned(),
        );
    }
    config.transport()?;
    Ok(Some(config))
}

/// `[[mcp]]` entries for `servers`, as TOML to paste into buddy.toml.
pub fn to_toml(servers: &[McpServerConfig]) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let mut out = String::new();
    for server in servers {
        out.push_str("[[mcp]]\n");
        out.push_str(&format!("name = {}\n", quote(&server.name)));
        if let Some(url) = &server.url {
            out.push_str(&format!("url = {}\n", quote(url)));
        }
        if !server.command.is_empty() {
            let list: Vec<String> = server
                .command
                .iter()
                .chain(&server.args)
                .map(|a| quote(a))
                .collect();
            out.push_str(&format!("command = [{}]\n", list.join(", ")));
        }
        if !server.required {
            out.push_str("required = false\n");
        }
        if let Some(cwd) = &server.cwd {
            out.push_str(&format!("cwd = {}\n", quote(&cwd.display().to_string())));
        }
        for (table, map) in [("env", &server.env), ("headers", &server.headers)] {
            if !map.is_empty() {
                let pairs: Vec<String> = map
                    .iter()
                    .map(|(k, v)| format!("{} = {}", quote(k), quote(v)))
                    .collect();
                out.push_str(&format!("{table} = {{ {} }}\n", pairs.join(", ")));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::server::Transport;

    const CLAUDE_DESKTOP: &str = r#"{
      "mcpServers": {
        "filesystem": {
          "command": "npx",
          "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/ada/Desktop"]
        },
        "github": {
          "command": "docker",
          "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
          "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "<token>"}
        },
        "old": {"command": "x", "disabled": true}
      }
    }"#;

    #[test]
    fn a_claude_desktop_config_with_two_servers_becomes_two_entries() {
        let Imported { servers, skipped } =
            import_mcp_servers(CLAUDE_DESKTOP, "claude.json").unwrap();
        assert_eq!(skipped, [], "a disabled server is left out, not skipped");
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["filesystem", "github"]);
        assert_eq!(
            servers[0].transport().unwrap(),
            Transport::Stdio {
                program: "npx",
                args: &[
                    "-y".to_owned(),
                    "@modelcontextprotocol/server-filesystem".to_owned(),
                    "/Users/ada/Desktop".to_owned()
                ]
            }
        );
        assert_eq!(servers[1].env["GITHUB_PERSONAL_ACCESS_TOKEN"], "<token>");
        // And back as TOML that buddy.toml accepts.
        let toml = to_toml(&servers);
        #[derive(Deserialize)]
        struct File {
            mcp: Vec<McpServerConfig>,
        }
        let parsed: File = toml::from_str(&toml).unwrap();
        assert_eq!(parsed.mcp[1].command_line(), servers[1].command_line());
        assert_eq!(parsed.mcp[1].env, servers[1].env);
        assert!(!parsed.mcp[1].required, "{toml}");
    }

    #[test]
    fn vs_code_http_servers_come_in() {
        let vscode = r#"{"servers": {"remote": {"type": "http", "url": "https://mcp.example.com/mcp",
                         "headers": {"Authorization": "Bearer x"}}}}"#;
        let imported = import_mcp_servers(vscode, "mcp.json").unwrap();
        assert_eq!(
            imported.servers[0].url.as_deref(),
            Some("https://mcp.example.com/mcp")
        );
        assert_eq!(imported.servers[0].headers["Authorization"], "Bearer x");
        assert!(
            import_mcp_servers("{}", "b.json")
                .unwrap_err()
                .to_string()
                .contains("mcpServers")
        );
    }

    /// One server buddy cannot run (legacy SSE, an unknown transport, a broken entry)
    /// is skipped with its reason; the others come in.
    #[test]
    fn servers_buddy_cannot_run_are_skipped_with_the_reason_and_the_rest_come_in() {
        let file = r#"{"mcpServers": {
            "time": {"command": "uvx", "args": ["mcp-server-time"]},
            "linear": {"type": "sse", "url": "https://mcp.linear.app/sse"},
            "cursor": {"url": "http://localhost:8931/sse"},
            "cursor2": {"url": "http://localhost:8931/sse/?key=1"},
            "notsse": {"url": "http://localhost:8931/ssex"},
            "remote": {"type": "http", "url": "https://mcp.example.com/mcp"},
            "socket": {"type": "ws", "url": "ws://127.0.0.1:9/"},
            "both": {"command": "x", "url": "http://127.0.0.1:9/mcp"},
            "nothing": {"args": ["a"]},
            "odd": {"command": 7},
            "asks": {"type": "http", "url": "https://x/mcp", "headers": {"Authorization": "${input:token}"}}
        }}"#;
        let Imported { servers, skipped } = import_mcp_servers(file, "claude.json").unwrap();
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["notsse", "remote", "time"]);
        assert!(
            servers.iter().all(|s| !s.required),
            "imported servers are not required"
        );
        let reasons: Vec<(&str, &str)> = skipped
            .iter()
            .map(|s| (s.name.as_str(), s.reason.as_str()))
            .collect();
        let names: Vec<&str> = reasons.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "asks", "both", "cursor", "cursor2", "linear", "nothing", "odd", "socket"
            ]
        );
        for (name, words) in [
            ("asks", "${input:"),
            ("both", "both `command` and `url`"),
            ("linear", "legacy SSE transport"),
            ("cursor", "ends in `/sse`"),
            ("cursor2", "legacy SSE transport"),
            ("nothing", "neither `command` nor `url`"),
            ("odd", "not one buddy can read"),
            ("socket", "\"ws\""),
        ] {
            let reason = reasons.iter().find(|(n, _)| *n == name).map(|(_, r)| *r);
            assert!(
                reason.is_some_and(|r| r.contains(words)),
                "{name}: {reason:?}"
            );
        }
        let shown = skipped[4].to_string();
        assert!(
            shown.starts_with(
                "MCP server `linear` of claude.json is skipped: it uses the legacy SSE"
            ),
            "{shown}"
        );
    }
}
