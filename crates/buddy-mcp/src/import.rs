//! MCP servers as the other MCP clients write them (Claude Desktop, Cursor, Claude Code:
//! `{"mcpServers": {"name": {"command", "args", "env"}}}`; VS Code: `{"servers": …}`),
//! read into buddy's `[[mcp]]` entries.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::config::McpServerConfig;

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

/// The servers of an MCP client's JSON configuration (`origin` names it in errors), in
/// name order; disabled ones are left out.
pub fn import_mcp_servers(text: &str, origin: &str) -> Result<Vec<McpServerConfig>, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("{origin}: not JSON: {e}"))?;
    let servers = doc
        .get("mcpServers")
        .or_else(|| doc.get("servers"))
        .and_then(Value::as_object)
        .ok_or_else(|| {
            format!("{origin}: no `mcpServers` (or `servers`) object: this is not an MCP client's configuration")
        })?;
    let mut out = Vec::new();
    let mut names: Vec<&String> = servers.keys().collect();
    names.sort();
    for name in names {
        let entry: Entry = serde_json::from_value(servers[name].clone())
            .map_err(|e| format!("{origin}: server `{name}`: {e}"))?;
        if entry.disabled {
            continue;
        }
        if matches!(entry.kind.as_deref(), Some("sse")) {
            return Err(format!(
                "{origin}: server `{name}` uses the SSE transport, which buddy does not speak; \
                 use its Streamable HTTP endpoint (`url`) or its stdio command"
            ));
        }
        let mut config = McpServerConfig::stdio(name, &[]);
        match (entry.command, entry.url) {
            (Some(command), None) => {
                config.command = vec![command];
                config.args = entry.args;
            }
            (None, Some(url)) => config.url = Some(url),
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{origin}: server `{name}` has both `command` and `url`; keep one"
                ));
            }
            (None, None) => {
                return Err(format!(
                    "{origin}: server `{name}` has neither `command` nor `url`"
                ));
            }
        }
        config.env = entry.env;
        config.cwd = entry.cwd;
        config.headers = entry.headers;
        config.transport()?;
        out.push(config);
    }
    Ok(out)
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
    use crate::config::Transport;

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
        let servers = import_mcp_servers(CLAUDE_DESKTOP, "claude.json").unwrap();
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
    }

    #[test]
    fn vs_code_http_servers_come_in_and_sse_ones_are_refused_by_name() {
        let vscode = r#"{"servers": {"remote": {"type": "http", "url": "https://mcp.example.com/mcp",
                         "headers": {"Authorization": "Bearer x"}}}}"#;
        let servers = import_mcp_servers(vscode, "mcp.json").unwrap();
        assert_eq!(
            servers[0].url.as_deref(),
            Some("https://mcp.example.com/mcp")
        );
        let sse = r#"{"mcpServers": {"old": {"type": "sse", "url": "http://x/sse"}}}"#;
        assert!(
            import_mcp_servers(sse, "a.json")
                .unwrap_err()
                .contains("SSE")
        );
        assert!(
            import_mcp_servers("{}", "b.json")
                .unwrap_err()
                .contains("mcpServers")
        );
    }
}
