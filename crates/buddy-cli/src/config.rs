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
    pub server: ServerConfig,
    /// `[approval]`: which tool calls wait for a person's yes.
    #[serde(default)]
    pub approval: ApprovalConfig,
    /// `[[mcp]]`: MCP servers whose tools are offered beside the skills.
    #[serde(default)]
    pub mcp: Vec<McpServerConfig>,
    /// MCP client configurations to take servers from (Claude Desktop's
    /// `claude_desktop_config.json`, Cursor's or Claude Code's `mcp.json`: `mcpServers`,
    /// or VS Code's `servers`), beside the `[[mcp]]` entries; relative to buddy.toml.
    #[serde(default)]
    pub mcp_import: Vec<PathBuf>,
    /// `[telemetry]`: export turns' spans over OTLP (also switched on by `OTEL_*`).
    #[serde(default)]
    pub telemetry: Option<buddy_telemetry::TelemetryConfig>,
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

/// The `[server]` section.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on.
    pub listen: String,
    /// SQLite file of the conversation store.
    pub db: PathBuf,
    /// A `postgres://` URL: conversations in PostgreSQL, shared by every instance that
    /// names it (instead of `db`).
    pub store: Option<String>,
    /// Environment variable with the accepted API keys, comma-separated.
    pub api_keys_env: String,
    pub max_body_bytes: usize,
    pub max_concurrent_turns_per_key: usize,
    pub shutdown_grace_secs: f64,
    /// Named keys (`[[server.keys]]`), beside the unnamed ones of `api_keys_env`.
    pub keys: Vec<KeyConfig>,
    /// Whether a request's policy may switch loop detection off.
    pub allow_loop_detection_off: bool,
    /// Whether `/v1/chat` requests may bring MCP servers of their own (HTTP only).
    pub allow_request_mcp: bool,
    /// Connections held at once (a full table sheds the least useful one).
    pub max_connections: usize,
    /// Connections one client address may hold (0: no limit; raise it behind a proxy).
    pub max_connections_per_address: usize,
    /// Seconds a client has to send a request's headers (also the keep-alive idle limit).
    pub header_timeout_secs: f64,
    /// Seconds a client has to send a request's whole body.
    pub body_timeout_secs: f64,
    /// Seconds a `/v1/responses` WebSocket may stay silent between requests.
    pub websocket_idle_secs: f64,
    /// How `/v1/responses` shows buddy's own skill calls: `mcp_call` items (the default,
    /// what OpenAI clients read) or `buddy:skill_call` extension items.
    pub responses_skill_calls: buddy_server::SkillCalls,
    /// What each key's turns may cost per UTC day / calendar month, in US dollars, unless
    /// the key sets its own; at the ceiling new turns get 429 (unset: no ceiling).
    pub max_daily_cost_usd: Option<buddy_core::Usd>,
    pub max_monthly_cost_usd: Option<buddy_core::Usd>,
    /// Whether a client that drops a turn's stream cancels the turn (off: the turn runs
    /// on and the client may reattach at `GET /v1/turns/{id}/events`).
    pub cancel_on_disconnect: bool,
    /// Seconds a turn's events are kept after it ends, for clients reattaching late.
    pub turn_events_grace_secs: f64,
}

/// One `[[server.keys]]` entry: a named API key, given by the environment variable that
/// holds it or by its SHA-256, never written into buddy.toml itself.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    pub name: String,
    /// Environment variable holding the key.
    #[serde(default)]
    pub key_env: Option<String>,
    /// Hex SHA-256 of the key (`printf %s "$KEY" | sha256sum`).
    #[serde(default)]
    pub key_sha256: Option<String>,
    /// May list, read and delete every conversation.
    #[serde(default)]
    pub admin: bool,
    /// This key's own spend ceilings (US dollars per UTC day / calendar month).
    #[serde(default)]
    pub max_daily_cost_usd: Option<buddy_core::Usd>,
    #[serde(default)]
    pub max_monthly_cost_usd: Option<buddy_core::Usd>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:8080".to_owned(),
            db: PathBuf::from("buddy.db"),
            store: None,
            api_keys_env: "BUDDY_API_KEYS".to_owned(),
            max_body_bytes: 1024 * 1024,
            max_concurrent_turns_per_key: 8,
            shutdown_grace_secs: 30.0,
            keys: Vec::new(),
            allow_loop_detection_off: false,
            allow_request_mcp: false,
            max_connections: 1024,
            max_connections_per_address: 256,
            header_timeout_secs: 10.0,
            body_timeout_secs: 30.0,
            websocket_idle_secs: 300.0,
            responses_skill_calls: buddy_server::SkillCalls::default(),
            max_daily_cost_usd: None,
            max_monthly_cost_usd: None,
            cancel_on_disconnect: false,
            turn_events_grace_secs: 300.0,
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
        for file in &config.mcp_import {
            let file = base.join(file);
            let shown = file.display().to_string();
            let text = std::fs::read_to_string(&file).map_err(|source| ConfigError::Read {
                path: shown.clone(),
                source,
            })?;
            let servers = buddy_mcp::import_mcp_servers(&text, &shown).map_err(|message| {
                ConfigError::Invalid {
                    path: shown.clone(),
                    message,
                }
            })?;
            for server in servers {
                if config.mcp.iter().any(|s| s.name == server.name) {
                    return Err(ConfigError::Invalid {
                        path: shown.clone(),
                        message: format!(
                            "server `{}` is also an [[mcp]] entry of buddy.toml; keep one of them",
                            server.name
                        ),
                    });
                }
                config.mcp.push(server);
            }
        }
        Ok(config)
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
        }
        if let Some(t) = config.skills.timeout_secs
            && !(t > 0.0 && t <= 3600.0)
        {
            return Err(ConfigError::Invalid {
                path: origin.to_owned(),
                message: format!("skills.timeout_secs must be in (0, 3600], got {t}"),
            });
        }
        Ok(config)
    }
}
