//! A server's health as `buddy serve` reports it (`GET /v1/health`): connected or not,
//! why not, and when it is tried again.

use std::time::Instant;

use serde::Serialize;

use super::{McpSource, ServerState};

/// One MCP server's health.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct McpHealth {
    /// Its `[[mcp]]` name.
    pub name: String,
    /// Whether buddy refuses to start without it.
    pub required: bool,
    /// `idle` (not started yet), `running`, `down` (tried again) or `gave_up`.
    pub state: &'static str,
    /// The server's own name and version, while running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The protocol version agreed, while running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Why it is down or was given up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it is tried again: `background` (in `next_retry_in_secs`), `next_call` (a
    /// server that failed during a call is restarted for the next one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<&'static str>,
    /// Seconds to the next background try.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_retry_in_secs: Option<f64>,
    /// Its tools that are not offered, each with the reason.
    pub left_out: Vec<LeftOutTool>,
}

/// A tool of a server that is not offered.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LeftOutTool {
    pub tool: String,
    pub reason: String,
}

impl McpSource {
    /// Its health now.
    pub fn health(&self) -> McpHealth {
        let next_try = self.next_try.lock().ok().and_then(|t| *t);
        let mut health = McpHealth {
            name: self.config.name.clone(),
            required: self.config.required,
            state: "idle",
            server: None,
            protocol: None,
            error: None,
            retry: None,
            next_retry_in_secs: None,
            left_out: self
                .left_out()
                .into_iter()
                .map(|(tool, reason)| LeftOutTool { tool, reason })
                .collect(),
        };
        match self.state() {
            ServerState::Idle => {}
            ServerState::Running { server, protocol } => {
                health.state = "running";
                health.server = Some(server);
                health.protocol = Some(protocol);
            }
            ServerState::Down(why) => {
                health.state = "down";
                health.error = Some(why);
                match next_try {
                    Some(at) => {
                        health.retry = Some("background");
                        let secs = at.saturating_duration_since(Instant::now()).as_secs_f64();
                        health.next_retry_in_secs = Some((secs * 10.0).round() / 10.0);
                    }
                    None => health.retry = Some("next_call"),
                }
            }
            ServerState::GaveUp(why) => {
                health.state = "gave_up";
                health.error = Some(why);
            }
        }
        health
    }

    /// Notes when the background tries start it again (none: they ended).
    pub(crate) fn set_next_try(&self, at: Option<Instant>) {
        if let Ok(mut next) = self.next_try.lock() {
            *next = at;
        }
    }
}
