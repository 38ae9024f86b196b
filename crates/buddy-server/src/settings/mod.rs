//! How a server is set up: its settings, the keys it accepts, and what each key may
//! spend.

mod api_key;

use std::sync::Arc;
use std::time::Duration;

use buddy_core::Usd;
use buddy_engine::{ApprovalRules, PriceTable};
use buddy_telemetry::Telemetry;
use serde::Deserialize;

pub(crate) use api_key::key_for;
pub use api_key::{ApiKey, BadKeyHash};

/// Operating limits of a server.
#[derive(Clone, Debug)]
pub struct ServerSettings {
    /// Accepted bearer keys; empty means no auth (only allowed on loopback).
    pub api_keys: Vec<ApiKey>,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Turns one key may run at once; more get 429.
    pub max_concurrent_turns_per_key: usize,
    /// How long running turns may go on after a shutdown signal before they are cancelled.
    pub shutdown_grace: Duration,
    /// Whether a request's policy may switch loop detection off (other limits may only
    /// ever be lowered by a request).
    pub allow_loop_detection_off: bool,
    /// Connections held at once. A new one past it takes the place of the connection
    /// doing the least (see the README's security section); it is refused (503) only
    /// when every connection is answering a request.
    pub max_connections: usize,
    /// Connections one client address may hold at once (0: no limit). Behind a reverse
    /// proxy every client has the proxy's address: raise it to `max_connections` there.
    pub max_connections_per_address: usize,
    /// Time a client has to send a request's headers (and to start the next request on
    /// a kept-alive connection).
    pub header_timeout: Duration,
    /// Time a client has to send a request's whole body, counted from its head (not
    /// restarted by each byte).
    pub body_timeout: Duration,
    /// Which calls of `/v1/chat` turns wait for approval (the turn pauses; the client
    /// resumes it at `/v1/conversations/{id}/resume`).
    pub approval: ApprovalRules,
    /// Whether `/v1/chat` requests may bring MCP servers of their own (HTTP only).
    pub allow_request_mcp: bool,
    /// The same for the OpenAI-compatible endpoints, which have no resume: usually
    /// `unattended` (a call that needs approval is refused and the model reads why).
    pub openai_approval: ApprovalRules,
    /// What the models cost (buddy.toml's `prices`, then buddy's list prices).
    pub prices: PriceTable,
    /// What each key's turns may cost per UTC day and month, for keys without a ceiling
    /// of their own (and for every caller when there are no keys).
    pub key_spend: SpendCeiling,
    /// How `/v1/responses` shows buddy's own skill calls (a request's
    /// `buddy_skill_calls` overrides it).
    pub responses_skill_calls: SkillCalls,
    /// How long a `/v1/responses` WebSocket may go without a request before it is closed.
    pub websocket_idle_timeout: Duration,
    /// Where turns' spans go (`[telemetry]`); `None`: no tracing.
    pub telemetry: Option<Arc<Telemetry>>,
    /// Whether a client that drops a turn's stream cancels the turn (buddy's behaviour
    /// before turns ran on their own). By default the turn goes on, and the client may
    /// reattach at `GET /v1/turns/{id}/events`.
    pub cancel_on_disconnect: bool,
    /// How long a turn's events are kept after it ends, for clients reattaching late.
    pub turn_events_grace: Duration,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            api_keys: Vec::new(),
            max_body_bytes: 1024 * 1024,
            max_concurrent_turns_per_key: 8,
            shutdown_grace: Duration::from_secs(30),
            allow_loop_detection_off: false,
            max_connections: 1024,
            max_connections_per_address: 256,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            approval: ApprovalRules::default(),
            allow_request_mcp: false,
            openai_approval: ApprovalRules::default(),
            prices: PriceTable::default(),
            telemetry: None,
            websocket_idle_timeout: Duration::from_secs(300),
            responses_skill_calls: SkillCalls::default(),
            key_spend: SpendCeiling::default(),
            cancel_on_disconnect: false,
            turn_events_grace: Duration::from_secs(300),
        }
    }
}

/// What one key may spend in US dollars, per UTC day and per UTC calendar month.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpendCeiling {
    pub daily: Option<Usd>,
    pub monthly: Option<Usd>,
}

impl SpendCeiling {
    /// True when neither a daily nor a monthly ceiling is set.
    pub fn is_none(&self) -> bool {
        self.daily.is_none() && self.monthly.is_none()
    }
}

/// How buddy's server-side skill calls appear among a response's output items.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum SkillCalls {
    /// `mcp_call` items (`server_label: "buddy"`): what the OpenAI SDKs and the clients
    /// built on them read.
    #[default]
    #[serde(rename = "mcp_call")]
    McpCall,
    /// `buddy:skill_call` items: an implementor-prefixed extension item, as the Open
    /// Responses specification asks of items it does not define.
    #[serde(rename = "buddy:skill_call")]
    Extension,
}
