//! `[[mcp]]` entries of buddy.toml.

use std::collections::BTreeMap;
use std::path::PathBuf;

use buddy_core::RepeatSemantics;
use serde::Deserialize;

use crate::config::roots::{Root, Roots};

/// One MCP server: how to start it and how its tools are named and judged.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The server's name in buddy: the default prefix of its tools and the name in errors.
    pub name: String,
    /// A stdio server: the program and its arguments, e.g. `["uvx", "mcp-server-time"]`;
    /// or the program alone (`command = "uvx"`) with `args`, as MCP clients write it.
    #[serde(default, deserialize_with = "program_or_list")]
    pub command: Vec<String>,
    /// The program's arguments, when `command` names the program alone.
    #[serde(default)]
    pub args: Vec<String>,
    /// A Streamable HTTP server: its endpoint, e.g. `http://127.0.0.1:3001/mcp`.
    #[serde(default)]
    pub url: Option<String>,
    /// Headers sent to an HTTP server with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Headers whose values come from environment variables (header = variable), so
    /// tokens stay out of buddy.toml: `headers_env = { Authorization = "MCP_TOKEN" }`.
    #[serde(default)]
    pub headers_env: BTreeMap<String, String>,
    /// Variables set for the server. A stdio server starts with a clean environment: the
    /// baseline (`PATH`, `HOME`, `LANG`, `LC_ALL`, `LC_CTYPE`, `TZ`, `TMPDIR`), the
    /// variables `env_passthrough` names, then these; buddy's API keys never reach it.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of buddy's own environment the server may see, beyond the baseline.
    #[serde(default)]
    pub env_passthrough: Vec<String>,
    /// Working directory of the server.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Prefix of its tools' names (`PREFIX__tool`); default: `name`; `""` for none.
    #[serde(default)]
    pub tool_prefix: Option<String>,
    /// Time to start and answer `initialize` and `tools/list`.
    #[serde(default = "default_startup_secs")]
    pub startup_timeout_secs: f64,
    /// Time one tool call may take; then it is an error result and the server restarted.
    #[serde(default = "default_call_secs")]
    pub call_timeout_secs: f64,
    /// Time a call the server turns into a task (2026-07-28 Tasks) may take in all, polled
    /// without model calls; then the task is cancelled and the call is an error result.
    #[serde(default = "default_task_secs")]
    pub task_timeout_secs: f64,
    /// Restarts after a crash or hang before its tools fail without trying.
    #[serde(default = "default_restarts")]
    pub max_restarts: u32,
    /// Per-tool settings that beat the server's annotations, by the tool's own name.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolOverride>,
    /// Let the server ask buddy's model for completions (`sampling/createMessage`),
    /// answered with the session's provider and model. Off by default: the server
    /// would spend the operator's tokens.
    #[serde(default)]
    pub sampling: bool,
    /// OAuth for an HTTP server that asks for it (`[mcp.oauth]`): on by default.
    #[serde(default)]
    pub oauth: crate::auth::OAuthConfig,
    /// Where OAuth tokens are kept between runs, one file per server: set by the CLI
    /// (not an `[[mcp]]` key). None: for the process only.
    #[serde(skip)]
    pub credentials_dir: Option<PathBuf>,
    /// The user a stdio server runs as when buddy is root: `[skills] run_as`, set by the
    /// CLI (not an `[[mcp]]` key). Either way a root buddy's servers have no capabilities.
    #[serde(skip)]
    pub run_as: Option<buddy_skills::RunAs>,
    /// The sandbox, offered as its roots when `roots` says so: set by the CLI and the
    /// server (not an `[[mcp]]` key).
    #[serde(skip)]
    pub sandbox: Option<PathBuf>,
    /// The directories offered to it as roots: `"sandbox"`, `"none"`, or a list; by
    /// default those on its command line, else the sandbox (see [`Roots`]).
    #[serde(default)]
    pub roots: Roots,
    /// Whether buddy stops when it cannot start (true for `[[mcp]]` entries); false
    /// (imported servers): it is reported, its tools are left out and it is tried
    /// again in the background, its tools joining when it comes up.
    #[serde(default = "default_required")]
    pub required: bool,
}

/// How an MCP server is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport<'a> {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio {
        program: &'a str,
        args: &'a [String],
    },
    /// Streamable HTTP at this endpoint.
    Http { url: &'a str },
}

/// `command` as buddy.toml may give it: a list, or one string naming the program.
fn program_or_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ProgramOrList {
        Program(String),
        List(Vec<String>),
    }
    Ok(match ProgramOrList::deserialize(d)? {
        ProgramOrList::Program(program) => vec![program],
        ProgramOrList::List(list) => list,
    })
}

impl McpServerConfig {
    /// The command line, as shown to people: the program and every argument.
    pub fn command_line(&self) -> String {
        self.command
            .iter()
            .chain(&self.args)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What buddy.toml says about one MCP tool.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    /// Repeat semantics, instead of the one read from the annotations.
    #[serde(default)]
    pub semantics: Option<RepeatSemantics>,
}

fn default_required() -> bool {
    true
}

fn default_startup_secs() -> f64 {
    30.0
}

fn default_task_secs() -> f64 {
    3600.0
}

fn default_call_secs() -> f64 {
    60.0
}

fn default_restarts() -> u32 {
    3
}

impl McpServerConfig {
    /// A server started by `command` with every default.
    pub fn stdio(name: &str, command: &[&str]) -> Self {
        McpServerConfig {
            name: name.to_owned(),
            command: command.iter().map(|s| (*s).to_owned()).collect(),
            args: Vec::new(),
            url: None,
            headers: BTreeMap::new(),
            headers_env: BTreeMap::new(),
            env: BTreeMap::new(),
            env_passthrough: Vec::new(),
            cwd: None,
            tool_prefix: None,
            startup_timeout_secs: default_startup_secs(),
            call_timeout_secs: default_call_secs(),
            task_timeout_secs: default_task_secs(),
            max_restarts: default_restarts(),
            tools: BTreeMap::new(),
            sampling: false,
            oauth: crate::auth::OAuthConfig::default(),
            credentials_dir: None,
            run_as: None,
            sandbox: None,
            roots: Roots::Auto,
            required: true,
        }
    }

    /// A Streamable HTTP server at `url` with every default.
    pub fn http(name: &str, url: &str) -> Self {
        McpServerConfig {
            url: Some(url.to_owned()),
            ..McpServerConfig::stdio(name, &[])
        }
    }

    /// How the server is reached, or why the entry names neither or both ways.
    pub fn transport(&self) -> Result<Transport<'_>, String> {
        if self.command.len() > 1 && !self.args.is_empty() {
            return Err(format!(
                "MCP server `{}` has arguments in both `command` and `args`; give the program alone in \
                 `command` with `args`, or everything in `command`",
                self.name
            ));
        }
        match (self.command.split_first(), &self.url) {
            (Some(_), Some(_)) => Err(format!(
                "MCP server `{}` has both `command` and `url`; give one: a command for a stdio server, a url for an HTTP one",
                self.name
            )),
            // Everything in `command`, or the program alone there and its arguments in `args`.
            (Some((program, rest)), None) => Ok(Transport::Stdio {
                program,
                args: if self.args.is_empty() {
                    rest
                } else {
                    &self.args
                },
            }),
            (None, Some(url)) => Ok(Transport::Http { url }),
            (None, None) => Err(format!(
                "MCP server `{}` has no `command` (a stdio server: command = [\"program\", \"arg\"]) and no `url` (a Streamable HTTP server)",
                self.name
            )),
        }
    }

    /// The roots offered to it (see [`Roots`]); an HTTP server has no command line, so
    /// by default it is offered the sandbox.
    pub fn offered_roots(&self) -> Vec<Root> {
        let args: &[String] = match self.transport() {
            Ok(Transport::Stdio { args, .. }) => args,
            _ => &[],
        };
        let cwd = match &self.cwd {
            Some(cwd) => cwd.clone(),
            None => std::env::current_dir().unwrap_or_default(),
        };
        self.roots.offered(args, &cwd, self.sandbox.as_deref())
    }

    /// The name the model calls `tool` of this server by: `prefix__tool`, cut to the
    /// 64 characters of `[A-Za-z0-9_-]` every provider accepts.
    pub fn skill_name(&self, tool: &str) -> String {
        let prefix = self.tool_prefix.as_deref().unwrap_or(&self.name);
        let joined = if prefix.is_empty() {
            tool.to_owned()
        } else {
            format!("{prefix}__{tool}")
        };
        joined
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_made_valid() {
        let mut config = McpServerConfig::stdio("time", &["x"]);
        assert_eq!(
            config.skill_name("get_current_time"),
            "time__get_current_time"
        );
        assert_eq!(config.skill_name("a.b c"), "time__a_b_c");
        config.tool_prefix = Some(String::new());
        assert_eq!(config.skill_name("echo"), "echo");
        assert_eq!(config.skill_name(&"x".repeat(80)).len(), 64);
    }
}
