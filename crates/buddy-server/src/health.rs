//! `GET /v1/health`: the server is up, and how each MCP server of the turns' tools is
//! (connected, or down with the reason and when it is tried again). `/healthz` stays a
//! bare liveness check that needs no key.

use axum::extract::State;
use axum::{Extension, Json};
use serde_json::{Value, json};

use crate::caller::Caller;
use crate::state::AppState;

/// The health report. An admin key (or a server without keys, on loopback) sees each
/// MCP server's reasons and tools; another key sees names and states only.
pub(crate) async fn health(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Json<Value> {
    let full = caller.admin || state.inner.settings.api_keys.is_empty();
    let servers: Vec<buddy_mcp::McpHealth> = state
        .inner
        .backend
        .mcp_servers()
        .iter()
        .map(|source| source.health())
        .collect();
    let degraded = servers
        .iter()
        .any(|s| matches!(s.state, "down" | "gave_up"));
    let mcp: Vec<Value> = servers
        .iter()
        .map(|server| match full {
            true => serde_json::to_value(server).unwrap_or(Value::Null),
            false => {
                json!({"name": server.name, "required": server.required, "state": server.state})
            }
        })
        .collect();
    Json(json!({
        "status": if degraded { "degraded" } else { "ok" },
        "mcp": mcp,
    }))
}
