//! `buddy.toml`: the policy (with per-model patterns) and the skills.

use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use buddy_engine::{ApprovalMode, ApprovalRules, PolicyConfig};
use buddy_mcp::McpServerConfig;
use buddy_providers::ProviderConfig;
use buddy_skills::CommandSkillConfig;
use buddy_skills::builtin::BUILTIN_NAMES;
use serde::Deserialize;

/// `buddy.toml` could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config `{path}`: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("config `{path}` is not valid: {message}")]
    Invalid { path: String, message: String },
}

/// The whole `buddy.toml`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuddyConfig {
    /// `[policy]` and `[policy.model."pattern"]`.
    #[serde(default)]
    pub policy: PolicyConfig,
    /// `[skills]` and `[[skills.command]]`.
    #[serde(default)]
    pub skills: SkillsConfig,
    /// The provider used when `--provider` is not given (default: the scripted model).
    #[serde(default)]
    pub default_provider: Option<String>,
    /// `[providers.NAME]` tables.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// `[server]`: `buddy serve`.
    #[serde(default)]
    pub server: buddy_server::ServerSettings,
    /// `[approval]`: which tool calls wait for a person's yes.
    #[serde(default)]
    pub approval: ApprovalConfig,
    /// Where the OAuth tokens of HTTP MCP servers are kept, one file per server (default:
    /// `$BUDDY_MCP_TOKENS`, else `$XDG_STATE_HOME/buddy/mcp-tokens`, else
    /// `~/.local/state/buddy/mcp-tokens`); relative to buddy.toml.
    #[serde(default)]
    pub mcp_tokens: Option<PathBuf>,
    /// `[[mcp]]`: MCP servers whose tools are offered beside the skills.
    #[serde(default)]
    pub mcp: Vec<McpServerConfig>,
    /// MCP client configurations to take servers from (Claude Desktop's
    /// `claude_desktop_config.json`, Cursor's or Claude Code's `mcp.json`: `mcpServers`,
    /// or VS Code's `servers`), beside the `[[mcp]]` entries; relative to buddy.toml, `~`
    /// and `$HOME` at the start expanded.
    #[serde(default)]
    pub mcp_import: Vec<PathBuf>,
    /// Servers of the `mcp_import` files buddy cannot run, each with the reason (filled
    /// in by [`BuddyConfig::load`]; commands warn about them).
    #[serde(skip)]
    pub mcp_skipped: Vec<buddy_mcp::SkippedServer>,
    /// `[telemetry]`: export turns' spans over OTLP (also switched on by `OTEL_*`).
    #[serde(default)]
    pub telemetry: Option<buddy_telemetry::TelemetryConfig>,
    /// `[[agents]]`: sub-agents offered to turns as tools, each running a turn of its own
    /// under the calling turn's budget.
    #[serde(default)]
    pub agents: Vec<buddy_engine::AgentSpec>,
}

/// `path` with a leading `~` or `$HOME` (`${HOME}`) replaced by `home`, so the book's
/// `~/.config/Claude/…` (docs/guide/mcp.md) works as written; other paths are returned as they are.
pub fn expand_home(path: &Path, home: Option<&Path>) -> Result<PathBuf, String> {
    let Some(text) = path.to_str() else {
        return Ok(path.to_owned());
    };
    let rest = ["~", "${HOME}", "$HOME"].iter().find_map(|prefix| {
        let rest = text.strip_prefix(prefix)?;
        (rest.is_empty() || rest.starts_with('/')).then_some(rest.trim_start_matches('/'))
    });
    let Some(rest) = rest else {
        return Ok(path.to_owned());
    };
    let home = home.ok_or_else(|| {
        format!("`{text}` starts with the home directory, but HOME is not set; give the full path")
    })?;
    Ok(if rest.is_empty() {
        home.to_owned()
    } else {
        home.join(rest)
    })
}

/// The `[approval]` section.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalConfig {
    /// `never`, `always`, or `destructive` (the default): calls to skills with side
    /// effects (`write_file`, MCP tools marked destructive or not marked) are asked about.
    pub mode: ApprovalMode,
    /// Per-skill modes by name or glob (`"fs__*" = "always"`); the longest pattern wins.
    pub skills: BTreeMap<String, ApprovalMode>,
    /// On the server: turns of `/v1/chat` pause for approval; the OpenAI endpoints have
    /// no way to resume, so there a call that needs approval is refused (the model reads
    /// why) unless this is `"run"`, which runs it without asking.
    pub openai_endpoints: OpenAiApproval,
}

/// What the OpenAI-compatible endpoints do with a call that needs approval.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum OpenAiApproval {
    /// Not run; the model reads that it needs approval.
    #[default]
    Refuse,
    /// Run without asking.
    Run,
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        ApprovalConfig {
            mode: ApprovalMode::Destructive,
            skills: BTreeMap::new(),
            openai_endpoints: OpenAiApproval::Refuse,
        }
    }
}

impl ApprovalConfig {
    /// The engine's rules; `unattended` when nobody can be asked.
    pub fn rules(&self, mode_override: Option<ApprovalMode>, unattended: bool) -> ApprovalRules {
        let (mode, skills) = match mode_override {
            // A mode on the command line applies to every skill.
            Some(mode) => (mode, BTreeMap::new()),
            None => (self.mode, self.skills.clone()),
        };
        ApprovalRules {
            mode,
            skills,
            unattended,
        }
    }
}

/// The `[skills]` section.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillsConfig {
    /// Directory the file skills are confined to (default: the current directory).
    #[serde(default)]
    pub sandbox: Option<PathBuf>,
    /// Built-in skills to offer (default: all).
    #[serde(default = "all_builtins")]
    pub builtin: Vec<String>,
    /// User-declared command skills.
    #[serde(default)]
    pub command: Vec<CommandSkillConfig>,
    /// Timeout for skills that declare none, in seconds.
    #[serde(default)]
    pub timeout_secs: Option<f64>,
    /// Cap on one tool result's text, in bytes.
    #[serde(default)]
    pub max_result_bytes: Option<usize>,
    /// Let the file skills read files with more than one hard link (default: refused,
    /// since the other link may be a file outside the sandbox).
    #[serde(default)]
    pub read_hard_links: bool,
    /// The user command skills and stdio MCP servers run as when buddy runs as root
    /// (`"nobody"`, `"65534"`, `"1000:1000"`); without it they run as root, but with no
    /// capabilities and `no_new_privs` either way.
    #[serde(default)]
    pub run_as: Option<buddy_skills::RunAs>,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        SkillsConfig {
            sandbox: None,
            builtin: all_builtins(),
            command: Vec::new(),
            timeout_secs: None,
            max_result_bytes: None,
            read_hard_links: false,
            run_as: None,
        }
    }
}

fn all_builtins() -> Vec<String> {
    BUILTIN_NAMES.iter().map(|s| (*s).to_owned()).collect()
}

impl BuddyConfig {
    /// Loads `path`; relative paths inside it are taken relative to its directory.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        let mut config = Self::parse(&text, &shown)?;
        let base = path.parent().unwrap_or(Path::new("."));
        if let Some(sandbox) = &config.skills.sandbox
            && sandbox.is_relative()
        {
            config.skills.sandbox = Some(base.join(sandbox));
        }
        if config.server.db.is_relative() {
            config.server.db = base.join(&config.server.db);
        }
        if let Some(tokens) = &config.mcp_tokens
            && tokens.is_relative()
        {
            config.mcp_tokens = Some(base.join(tokens));
        }
        for provider in config.providers.values_mut() {
            if let Some(scenario) = &provider.scenario
                && scenario.is_relative()
            {
                provider.scenario = Some(base.join(scenario));
            }
        }
        for server in &mut config.mcp {
            if let Some(cwd) = &server.cwd
                && cwd.is_relative()
            {
                server.cwd = Some(base.join(cwd));
            }
        }
        for command in &mut config.skills.command {
            if let Some(cwd) = &command.cwd
                && cwd.is_relative()
            {
                command.cwd = Some(base.join(cwd));
            }
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let imports = config.mcp_import.clone();
        let declared = config.mcp.len();
        for file in &imports {
            let file =
                expand_home(file, home.as_deref()).map_err(|message| ConfigError::Invalid {
                    path: shown.clone(),
                    message: format!("mcp_import {message}"),
                })?;
            let file = base.join(file);
            let origin = file.display().to_string();
            let text = std::fs::read_to_string(&file).map_err(|source| ConfigError::Read {
                path: origin.clone(),
                source,
            })?;
            let imported = buddy_mcp::import_mcp_servers(&text, &origin).map_err(|e| {
                ConfigError::Invalid {
                    path: origin.clone(),
                    message: e.to_string(),
                }
            })?;
            config.import(imported, &origin, declared)?;
        }
        config.give_mcp_servers_run_as();
        config.give_mcp_servers_token_dir();
        Ok(config)
    }

    /// Takes the servers of one `mcp_import` file: a name of one of the first `declared`
    /// servers (buddy.toml's `[[mcp]]` entries) is an error, buddy.toml must keep one of
    /// them; a name an earlier file gave is skipped.
    fn import(
        &mut self,
        imported: buddy_mcp::Imported,
        origin: &str,
        declared: usize,
    ) -> Result<(), ConfigError> {
        self.mcp_skipped.extend(imported.skipped);
        for server in imported.servers {
            match self.mcp.iter().position(|s| s.name == server.name) {
                Some(at) if at < declared => {
                    return Err(ConfigError::Invalid {
                        path: origin.to_owned(),
                        message: format!(
                            "server `{}` is also an [[mcp]] entry of buddy.toml; keep one of them",
                            server.name
                        ),
                    });
                }
                Some(_) => self.mcp_skipped.push(buddy_mcp::SkippedServer {
                    origin: origin.to_owned(),
                    name: server.name,
                    reason: "an earlier mcp_import file has a server of that name, which is used"
                        .to_owned(),
                }),
                None => self.mcp.push(server),
            }
        }
        Ok(())
    }

    /// Parses TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let config: BuddyConfig = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: origin.to_owned(),
            message: e.to_string(),
        })?;
        for name in &config.skills.builtin {
            if !BUILTIN_NAMES.contains(&name.as_str()) {
                return Err(ConfigError::Invalid {
                    path: origin.to_owned(),
                    message: format!(
                        "skills.builtin names `{name}`, which is not a built-in skill; known: {}",
                        BUILTIN_NAMES.join(", ")
                    ),
                });
            }
        }
        if let Some(name) = &config.default_provider
            && !config.providers.contains_key(name)
            && buddy_providers::ProviderKind::parse(name).is_none()
        {
            return Err(ConfigError::Invalid {
                path: origin.to_owned(),
                message: format!("default_provider `{name}` is not declared under [providers]"),
            });
        }
        config.server.check().map_err(|e| ConfigError::Invalid {
            path: origin.to_owned(),
            message: e.to_string(),
        })?;
        let mut names = std::collections::BTreeSet::new();
        for server in &config.mcp {
            let invalid = |message: String| ConfigError::Invalid {
                path: origin.to_owned(),
                message,
            };
            server
                .transport()
                .map_err(|m| invalid(format!("[[mcp]] {m}")))?;
            if !names.insert(server.name.as_str()) {
                return Err(invalid(format!(
                    "[[mcp]] name `{}` is used twice; give each server its own name",
                    server.name
                )));
            }
            if !(server.startup_timeout_secs > 0.0 && server.call_timeout_secs > 0.0) {
                return Err(invalid(format!(
                    "[[mcp]] `{}`: startup_timeout_secs and call_timeout_secs must be above 0",
                    server.name
                )));
            }
            if !(server.oauth.wait_secs > 0.0 && server.oauth.wait_secs <= 3600.0) {
                return Err(invalid(format!(
                    "[[mcp]] `{}`: oauth.wait_secs must be above 0 and at most 3600",
                    server.name
                )));
            }
            if !(server.task_timeout_secs > 0.0 && server.task_timeout_secs <= 7.0 * 86_400.0) {
                return Err(invalid(format!(
                    "[[mcp]] `{}`: task_timeout_secs must be above 0 and at most a week (604800)",
                    server.name
                )));
            }
        }
        if let Some(t) = config.skills.timeout_secs
            && !(t > 0.0 && t <= 3600.0)
        {
            return Err(ConfigError::Invalid {
                path: origin.to_owned(),
                message: format!("skills.timeout_secs must be in (0, 3600], got {t}"),
            });
        }
        if let Some(run_as) = &config.skills.run_as {
            run_as.check_usable().map_err(|e| ConfigError::Invalid {
                path: origin.to_owned(),
                message: format!("[skills] {e}"),
            })?;
        }
        let mut config = config;
        config.give_mcp_servers_run_as();
        config.give_mcp_servers_token_dir();
        Ok(config)
    }

    /// Where the HTTP MCP servers' OAuth tokens are kept: `mcp_tokens`, else
    /// `$BUDDY_MCP_TOKENS`, else the XDG state directory (none without a home).
    pub fn mcp_token_dir(&self) -> Option<PathBuf> {
        let from_env = |var: &str| {
            std::env::var_os(var)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        self.mcp_tokens
            .clone()
            .or_else(|| from_env("BUDDY_MCP_TOKENS"))
            .or_else(|| from_env("XDG_STATE_HOME").map(|d| d.join("buddy/mcp-tokens")))
            .or_else(|| from_env("HOME").map(|d| d.join(".local/state/buddy/mcp-tokens")))
    }

    fn give_mcp_servers_token_dir(&mut self) {
        let dir = self.mcp_token_dir();
        for server in &mut self.mcp {
            server.credentials_dir = dir.clone();
        }
    }

    /// `[skills] run_as` holds for the stdio MCP servers too.
    fn give_mcp_servers_run_as(&mut self) {
        for server in &mut self.mcp {
            server.run_as = self.skills.run_as.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_tilde_or_home_variable_is_the_home_directory() {
        let home = Path::new("/home/ada");
        for (given, expanded) in [
            (
                "~/.config/Claude/claude_desktop_config.json",
                "/home/ada/.config/Claude/claude_desktop_config.json",
            ),
            ("$HOME/mcp.json", "/home/ada/mcp.json"),
            ("${HOME}/mcp.json", "/home/ada/mcp.json"),
            ("~", "/home/ada"),
            ("mcp.json", "mcp.json"),
            ("/etc/mcp.json", "/etc/mcp.json"),
            ("~other/mcp.json", "~other/mcp.json"),
            ("$HOMEWORK/mcp.json", "$HOMEWORK/mcp.json"),
        ] {
            assert_eq!(
                expand_home(Path::new(given), Some(home)).unwrap(),
                PathBuf::from(expanded),
                "{given}"
            );
        }
        let error = expand_home(Path::new("~/mcp.json"), None).unwrap_err();
        assert!(error.contains("HOME is not set"), "{error}");
    }
}
