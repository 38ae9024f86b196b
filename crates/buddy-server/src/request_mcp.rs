//! MCP servers a request brings (`"mcp": [...]` on `/v1/chat` and its resume), when the
//! operator allows it: Streamable HTTP only — a request never starts a program here —
//! and no headers from the server's environment.

use std::collections::BTreeMap;
use std::sync::Arc;

use buddy_core::Toolbox;
use buddy_mcp::{McpServerConfig, McpSource, McpToolbox};
use buddy_skills::SkillRegistry;
use serde::Deserialize;

use crate::error::AppError;
use crate::state::AppState;

/// Most MCP servers one request may bring.
const MAX_REQUEST_SERVERS: usize = 4;

/// Most tools the servers of one request may add: more would fill the model's window
/// with definitions before the turn begins.
const MAX_REQUEST_TOOLS: usize = 256;

/// One MCP server named in a request.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RequestMcp {
    name: String,
    /// Its Streamable HTTP endpoint (`http://` or `https://`).
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    tool_prefix: Option<String>,
}

/// `toolbox` with the tools of the request's MCP servers beside it, started now and
/// stopped when the turn lets go of them.
pub(crate) async fn with_request_mcp(
    state: &AppState,
    toolbox: Arc<dyn Toolbox>,
    servers: Vec<RequestMcp>,
) -> Result<Arc<dyn Toolbox>, AppError> {
    if servers.is_empty() {
        return Ok(toolbox);
    }
    if !state.inner.settings.allow_request_mcp {
        return Err(AppError::BadRequest(
            "this server does not take MCP servers from requests; its operator can allow it \
             with `allow_request_mcp = true` under [server] in buddy.toml"
                .into(),
        ));
    }
    if servers.len() > MAX_REQUEST_SERVERS {
        return Err(AppError::BadRequest(format!(
            "a request may bring at most {MAX_REQUEST_SERVERS} MCP servers, not {}",
            servers.len()
        )));
    }
    let mut sources = Vec::with_capacity(servers.len());
    let names: Vec<String> = servers.iter().map(|s| format!("`{}`", s.name)).collect();
    for server in servers {
        if !(server.url.starts_with("http://") || server.url.starts_with("https://")) {
            return Err(AppError::BadRequest(format!(
                "MCP server `{}`: `url` must be an http:// or https:// endpoint",
                server.name
            )));
        }
        let mut config = McpServerConfig::http(&server.name, &server.url);
        config.headers = server.headers;
        config.tool_prefix = server.tool_prefix;
        config.startup_timeout_secs = 10.0;
        config.max_restarts = 1;
        sources.push(McpSource::new(config));
    }
    let own = toolbox.specs().len();
    let joined = McpToolbox::start(toolbox, sources, Box::new(SkillRegistry::new))
        .await
        .map_err(|e| AppError::BadRequest(e.to_string()))?;
    let added = joined.specs().len().saturating_sub(own);
    if added > MAX_REQUEST_TOOLS {
        return Err(AppError::BadRequest(format!(
            "the request's MCP servers ({}) list {added} tools; a request may add at most \
             {MAX_REQUEST_TOOLS} — bring a server with fewer tools",
            names.join(", ")
        )));
    }
    Ok(Arc::new(joined.into_table()))
}
