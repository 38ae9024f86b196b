//! One MCP server: started on demand, restarted (a bounded number of times) after a
//! crash or a hang, its calls bounded in time.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use buddy_core::SkillError;
use rmcp::model::ProtocolVersion;
use rmcp::service::ClientInitializeError;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::Value;

use crate::auth::{Authorization, challenge_of};
use crate::client::http::{http_client, http_transport};
use crate::config::server::{McpServerConfig, Transport};
use crate::requests::handler::Client;
use crate::requests::handler::{Handler, Notes};
use crate::requests::sampling::{Sampler, SamplingCount, SamplingUse};
use stderr::{StderrTail, log_stderr};

mod calls;
mod cause;
pub(crate) mod health;
mod login;
mod stderr;
mod stdio;
mod task_only;

/// How buddy opens a connection: it asks `server/discover` (2026-07-28, stateless,
/// per-request `_meta`) and falls back to the `initialize` handshake of 2025-11-25
/// and earlier when the server answers that with an error (rmcp waits 10 s for a
/// server that does not answer at all).
/// A server buddy speaks to by the handshake only (see [`McpSource::use_handshake`])
/// gets `initialize` at once.
fn lifecycle(handshake: bool) -> ClientLifecycleMode {
    match handshake {
        true => ClientLifecycleMode::Initialize,
        false => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        },
    }
}

/// The longest a new handshake session waits for its event stream before its first
/// call (see [`McpSource::event_stream_opened`]).
const EVENT_STREAM_WAIT: Duration = Duration::from_secs(2);

/// Why an MCP server could not be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    #[error(
        "MCP server `{server}`: cannot start `{command}`: {message}; check `command` under its [[mcp]] entry"
    )]
    Spawn {
        server: String,
        command: String,
        message: String,
    },
    #[error(
        "MCP server `{server}` did not finish starting within {secs}s: {message}; raise `startup_timeout_secs` or check the server"
    )]
    Startup {
        server: String,
        secs: f64,
        message: String,
    },
    #[error("MCP server `{server}` failed to start: {message}; check its [[mcp]] entry")]
    Failed { server: String, message: String },
    #[error("{message}")]
    NoCommand { server: String, message: String },
    /// It asks for OAuth authorization buddy could not get (the message says why and
    /// what to do).
    #[error("{message}")]
    Unauthorized { server: String, message: String },
}

/// What `buddy mcp list` shows of a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerState {
    /// Not started yet.
    Idle,
    /// Running; the server's name and version, and the protocol version agreed.
    Running { server: String, protocol: String },
    /// The last start or call failed; it is restarted on the next call.
    Down(String),
    /// It failed more often than `max_restarts`; its tools fail without trying.
    GaveUp(String),
}

/// One tool of a server, as `tools/list` gave it.
#[derive(Clone, Debug)]
pub struct McpTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// The `annotations` object, if any.
    pub annotations: Option<Value>,
    /// The JSON Schema of its `structuredContent`, if it declares one.
    pub output_schema: Option<Value>,
}

/// A running (or restartable) MCP server.
pub struct McpSource {
    config: McpServerConfig,
    client: tokio::sync::Mutex<Option<Arc<Client>>>,
    restarts: AtomicU32,
    state: Mutex<ServerState>,
    /// What the server's notifications said (tool list changes, progress).
    notes: Arc<Notes>,
    /// The last lines a stdio server wrote to stderr.
    stderr_tail: StderrTail,
    /// Whether an HTTP session's event stream has been opened (or refused) yet.
    stream_settled: std::sync::Mutex<Option<tokio::sync::watch::Receiver<bool>>>,
    /// Tools of its last listing left out, each with the reason.
    left_out: Mutex<Vec<(String, String)>>,
    /// The model that answers its sampling requests (with `sampling = true`).
    sampler: Mutex<Option<Sampler>>,
    /// Its sampling requests and their tokens.
    sampling: Arc<SamplingCount>,
    /// An HTTP server's OAuth tokens and how to get them.
    auth: Option<Authorization>,
    /// Spoken to by the `initialize` handshake (2025-11-25), where it may send requests
    /// of its own mid-call: set once a call showed it needs that.
    handshake: AtomicBool,
    /// Tools that take only task-augmented calls (2025-11-25 `taskSupport: "required"`),
    /// as their first call showed.
    pub(crate) task_only: Mutex<std::collections::HashSet<String>>,
    /// Tools buddy found it cannot serve, each with the reason: left out of listings.
    pub(crate) unservable: Mutex<std::collections::HashMap<String, String>>,
    /// When the background tries start it next (a server not required that is down).
    next_try: Mutex<Option<std::time::Instant>>,
    /// What a stdio server declared that rmcp's types drop (tools' task support).
    declared: Arc<Mutex<stdio::Declared>>,
}

impl McpSource {
    /// A source for `config`; nothing is started until [`McpSource::start`] or a call.
    pub fn new(config: McpServerConfig) -> Arc<Self> {
        let auth = config.url.as_deref().map(|url| {
            Authorization::new(
                &config.name,
                url,
                config.oauth.clone(),
                config.credentials_dir.as_deref(),
            )
        });
        Arc::new(McpSource {
            auth,
            config,
            client: tokio::sync::Mutex::new(None),
            restarts: AtomicU32::new(0),
            state: Mutex::new(ServerState::Idle),
            notes: Arc::default(),
            stderr_tail: Arc::default(),
            stream_settled: std::sync::Mutex::default(),
            left_out: Mutex::default(),
            sampler: Mutex::default(),
            sampling: Arc::default(),
            handshake: AtomicBool::new(false),
            task_only: Mutex::default(),
            unservable: Mutex::default(),
            next_try: Mutex::default(),
            declared: Arc::default(),
        })
    }

    /// What the server last wrote to stderr (a stdio server), oldest line first.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr_tail
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// `; the server said: …` with its last stderr lines, or nothing.
    fn said(&self) -> String {
        let tail = self.stderr_tail();
        match tail.is_empty() {
            true => String::new(),
            false => format!("; the server said: {}", tail.join(" | ")),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &McpServerConfig {
        &self.config
    }

    /// Lets `sampler` answer the server's sampling requests, when its entry says
    /// `sampling = true` (otherwise nothing changes). Takes effect at the next start.
    pub fn set_sampler(&self, sampler: Sampler) {
        if !self.config.sampling {
            return;
        }
        if let Ok(mut slot) = self.sampler.lock() {
            *slot = Some(sampler);
        }
    }

    /// The sampling requests the server made and the tokens they took.
    pub fn sampling_use(&self) -> SamplingUse {
        self.sampling.snapshot()
    }

    /// Tools of the last listing that are not offered, each with the reason.
    pub fn left_out(&self) -> Vec<(String, String)> {
        self.left_out.lock().map(|l| l.clone()).unwrap_or_default()
    }

    pub(crate) fn set_left_out(&self, tools: Vec<(String, String)>) {
        if let Ok(mut left_out) = self.left_out.lock() {
            *left_out = tools;
        }
    }

    /// What the server is doing now.
    pub fn state(&self) -> ServerState {
        self.state
            .lock()
            .map(|s| s.clone())
            .unwrap_or(ServerState::Idle)
    }

    fn set_state(&self, state: ServerState) {
        if let Ok(mut s) = self.state.lock() {
            *s = state;
        }
    }

    /// Starts the server and lists its tools (within `startup_timeout_secs`).
    pub async fn start(&self) -> Result<Vec<McpTool>, McpError> {
        let mut authorized = false;
        let listed = loop {
            let client = self.connected().await?;
            // Cleared before listing: a change announced from here on is listed again.
            self.notes.changed.store(false, Ordering::SeqCst);
            let secs = self.config.startup_timeout_secs;
            let listed =
                tokio::time::timeout(Duration::from_secs_f64(secs), client.list_all_tools()).await;
            // A token the server stopped taking (it moved to another authorization
            // server, say): authorize again, once.
            if let Ok(Err(error)) = &listed
                && !authorized
                && let Some(challenge) = challenge_of(error)
            {
                authorized = true;
                self.disconnect().await;
                self.authorize(Some(&challenge)).await?;
                continue;
            }
            break listed;
        };
        let tools = match listed {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => return Err(self.startup_failed(format!("tools/list failed: {e}")).await),
            Err(_) => return Err(self.startup_failed("tools/list got no answer".into()).await),
        };
        self.note_task_support();
        Ok(tools
            .into_iter()
            .map(|tool| {
                let annotations = tool
                    .annotations
                    .as_ref()
                    .and_then(|a| serde_json::to_value(a).ok());
                McpTool {
                    name: tool.name.to_string(),
                    description: tool.description.as_deref().unwrap_or_default().to_owned(),
                    input_schema: Value::Object((*tool.input_schema).clone()),
                    annotations,
                    output_schema: tool.output_schema.map(|s| Value::Object((*s).clone())),
                }
            })
            .collect())
    }

    /// Stops a server that failed to start (after `initialize`) and says why.
    async fn startup_failed(&self, message: String) -> McpError {
        self.disconnect().await;
        self.down_at_startup(message)
    }

    /// Marks the server down with a startup failure and says why.
    fn down_at_startup(&self, message: String) -> McpError {
        self.set_state(ServerState::Down(message.clone()));
        McpError::Startup {
            server: self.config.name.clone(),
            secs: self.config.startup_timeout_secs,
            message,
        }
    }

    /// The live client, starting the server if it is not running.
    pub(crate) async fn connected(&self) -> Result<Arc<Client>, McpError> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref().filter(|c| !c.is_transport_closed()) {
            return Ok(Arc::clone(client));
        }
        let name = self.config.name.clone();
        let handshake = self.handshake.load(Ordering::SeqCst);
        let mut started = self.open(lifecycle(handshake)).await?;
        if let Ok(Err(e)) = &started
            && let Some(challenge) = e.auth_challenge().map(str::to_owned)
        {
            // It wants a token: authorize (a person, in a browser) and connect again.
            self.authorize(Some(&challenge)).await?;
            started = self.open(lifecycle(handshake)).await?;
            if let Ok(Err(e)) = &started
                && e.auth_challenge().is_some()
            {
                let message =
                    format!("MCP server `{name}` still refuses buddy after authorizing ({e})");
                self.set_state(ServerState::Down(message.clone()));
                return Err(McpError::Unauthorized {
                    server: name,
                    message,
                });
            }
        }
        if let Ok(Err(e)) = &started {
            // It answered `server/discover` with something other than an error (a
            // sloppy legacy server answers every method): start it again and shake
            // hands the old way.
            tracing::debug!(server = %name, error = %e, "MCP server/discover failed; trying initialize");
            started = self.open(ClientLifecycleMode::Initialize).await?;
        }
        let client = match started {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => {
                // It ended or answered wrongly at once: not a timeout. Give its stderr a
                // moment to arrive, then quote it.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let url = self.config.url.as_deref();
                let message = format!("{}{}", cause::init_failure(&e, url), self.said());
                self.set_state(ServerState::Down(message.clone()));
                return Err(McpError::Failed {
                    server: name,
                    message,
                });
            }
            Err(_) => {
                return Err(self.down_at_startup(format!("no answer to initialize{}", self.said())));
            }
        };
        let (server, protocol) = match client.peer_info() {
            Some(info) => (
                info.server_info
                    .as_ref()
                    .map(|i| server_words(&i.name, &i.version))
                    .unwrap_or_else(|| "unnamed".to_owned()),
                info.protocol_version.to_string(),
            ),
            None => ("unknown".to_owned(), "unknown".to_owned()),
        };
        tracing::debug!(server = %name, %protocol, "MCP server started");
        self.event_stream_opened(&protocol).await;
        self.set_state(ServerState::Running { server, protocol });
        let client = Arc::new(client);
        *slot = Some(Arc::clone(&client));
        Ok(client)
    }

    /// On an HTTP session of the handshake (2025-11-25 and before), waits (at most [`EVENT_STREAM_WAIT`]) until its event
    /// stream is open: the server sends requests unrelated to a call (an
    /// `elicitation/create` of `server.request()`) on that stream only and drops them while
    /// it is not open, so a call made before would wait for a question never delivered.
    async fn event_stream_opened(&self, protocol: &str) {
        let settled = self.stream_settled.lock().ok().and_then(|mut s| s.take());
        if let Some(mut settled) = settled
            && protocol != ProtocolVersion::V_2026_07_28.to_string()
        {
            let _ = tokio::time::timeout(EVENT_STREAM_WAIT, settled.wait_for(|s| *s)).await;
        }
    }

    /// Starts the server (a stdio process) or reaches it (HTTP) and opens the MCP
    /// connection with `lifecycle`, within `startup_timeout_secs`.
    async fn open(
        &self,
        lifecycle: ClientLifecycleMode,
    ) -> Result<Result<Result<Client, ClientInitializeError>, tokio::time::error::Elapsed>, McpError>
    {
        let name = self.config.name.clone();
        let transport = self
            .config
            .transport()
            .map_err(|message| McpError::NoCommand {
                server: name.clone(),
                message,
            })?;
        let handler = Handler {
            server: name.clone(),
            notes: Arc::clone(&self.notes),
            roots: self.config.offered_roots(),
            sampler: self.sampler.lock().ok().and_then(|s| s.clone()),
            sampling: Arc::clone(&self.sampling),
        };
        let secs = self.config.startup_timeout_secs;
        let started = match transport {
            Transport::Stdio { program, args } => {
                let mut command = tokio::process::Command::new(program);
                command
                    .args(args)
                    .env_clear()
                    .envs(buddy_skills::clean_environment(
                        &self.config.env_passthrough,
                        &self.config.env,
                    ));
                if let Some(cwd) = &self.config.cwd {
                    command.current_dir(cwd);
                }
                // A root buddy's server gets no capabilities (and runs as `run_as`): it
                // could read buddy's secrets otherwise.
                buddy_skills::ChildPrivileges::for_run_as(self.config.run_as.as_ref())
                    .apply(&mut command);
                let (transport, stderr) = stdio::spawn(command, &self.declared).map_err(|e| {
                    let command = self.config.command_line();
                    self.set_state(ServerState::Down(format!("cannot start `{command}`: {e}")));
                    McpError::Spawn {
                        server: name.clone(),
                        command,
                        message: e.to_string(),
                    }
                })?;
                if let Some(stderr) = stderr {
                    if let Ok(mut tail) = self.stderr_tail.lock() {
                        tail.clear();
                    }
                    tokio::spawn(log_stderr(
                        name.clone(),
                        stderr,
                        Arc::clone(&self.stderr_tail),
                    ));
                }
                tokio::time::timeout(
                    Duration::from_secs_f64(secs),
                    handler.serve_with_lifecycle(transport, lifecycle),
                )
                .await
            }
            Transport::Http { url } => {
                let startup = |message| McpError::Startup {
                    server: name.clone(),
                    secs,
                    message,
                };
                let base = http_client(&self.config).map_err(startup)?;
                let client = match &self.auth {
                    Some(auth) => auth.http_client(&base).await.map_err(startup)?,
                    None => return Err(startup("no OAuth side for an HTTP server".into())),
                };
                let (transport, stream_settled) =
                    http_transport(&self.config, url, client).map_err(startup)?;
                if let Ok(mut slot) = self.stream_settled.lock() {
                    *slot = Some(stream_settled);
                }
                tokio::time::timeout(
                    Duration::from_secs_f64(secs),
                    handler.serve_with_lifecycle(transport, lifecycle),
                )
                .await
            }
        };
        Ok(started)
    }

    /// How many tool list changes the server has announced.
    pub fn list_changes_seen(&self) -> u32 {
        self.notes.changes_seen.load(Ordering::SeqCst)
    }

    /// How many times the server has asked for its roots (`roots/list`).
    pub fn roots_asked(&self) -> u32 {
        self.notes.roots_asked.load(Ordering::SeqCst)
    }

    /// The roots offered to it, each directory with its name.
    pub fn roots(&self) -> Vec<crate::config::roots::Root> {
        self.config.offered_roots()
    }

    /// How many progress notifications the server has sent, and the last one.
    pub fn progress_seen(&self) -> (u32, Option<String>) {
        let last = self
            .notes
            .last_progress
            .lock()
            .ok()
            .and_then(|last| last.clone());
        (self.notes.progress_seen.load(Ordering::SeqCst), last)
    }

    /// True once after the server said its tool list changed: the caller lists the
    /// tools again.
    pub fn take_tools_changed(&self) -> bool {
        self.notes.changed.swap(false, Ordering::SeqCst)
    }

    /// Says its tool list changed, so the table lists it again (a server that came up).
    pub(crate) fn mark_tools_changed(&self) {
        self.notes.changed.store(true, Ordering::SeqCst);
    }

    /// Gives up a server that never came up: its state says so, with the last reason.
    pub(crate) fn give_up_starting(&self) {
        if let ServerState::Down(message) = self.state() {
            self.set_state(ServerState::GaveUp(message));
        }
    }

    /// From the next connection on, speaks to the server by the `initialize` handshake
    /// (2025-11-25), where a server may send its own requests (`elicitation/create`,
    /// sampling) mid-call; drops the current connection. True when that is a change.
    pub(crate) async fn use_handshake(&self) -> bool {
        if self.handshake.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.disconnect().await;
        true
    }

    /// Drops the connection (which stops the server process).
    async fn disconnect(&self) {
        if let Some(client) = self.client.lock().await.take() {
            client.cancellation_token().cancel();
        }
    }

    /// Counts a failure of the server; past `max_restarts` it is given up.
    fn failed(&self, message: String) -> SkillError {
        let failures = self.restarts.fetch_add(1, Ordering::SeqCst) + 1;
        if failures > self.config.max_restarts {
            self.set_state(ServerState::GaveUp(message.clone()));
        } else {
            self.set_state(ServerState::Down(message.clone()));
        }
        SkillError::Failed(message)
    }
}

/// A server's name and version as `mcp list` and the health show them: the name alone
/// when it gives no version (never a stray space).
fn server_words(name: &str, version: &str) -> String {
    match (name.trim(), version.trim()) {
        ("", _) => "unnamed".to_owned(),
        (name, "") => name.to_owned(),
        (name, version) => format!("{name} {version}"),
    }
}
