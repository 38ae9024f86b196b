//! `GET /v1/health`: each MCP server's state; the reasons to an admin key, names and
//! states to another; a key is needed.

use std::sync::Arc;

use axum::http::StatusCode;
use buddy_engine::PolicyConfig;
use buddy_mcp::{McpServerConfig, McpSource};
use buddy_server::{ApiKey, AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::SqliteStore;
use serde_json::{Value, json};

use super::send;
use super::sharing::{ADMIN, ALICE, get};

struct WithMcp(Vec<Arc<McpSource>>);

impl Backend for WithMcp {
    fn models(&self) -> Vec<String> {
        Vec::new()
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        Err(BackendError("no models here".into()))
    }

    fn mcp_servers(&self) -> Vec<Arc<McpSource>> {
        self.0.clone()
    }
}

fn state(servers: Vec<Arc<McpSource>>) -> AppState {
    AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(WithMcp(servers)),
        PolicyConfig::default(),
        ServerSettings {
            api_keys: vec![
                ApiKey::new(ALICE, None, false),
                ApiKey::new(ADMIN, Some("ops"), true),
            ],
            ..ServerSettings::default()
        },
    )
}

#[tokio::test]
async fn a_down_server_is_reported_with_its_reason_to_an_admin_and_by_state_to_others() {
    let mut config = McpServerConfig::stdio("gone", &["/no/such/mcp-server"]);
    config.required = false;
    let source = McpSource::new(config);
    assert!(source.start().await.is_err());
    let state = state(vec![source]);

    let (status, _) = send(
        &state,
        axum::http::Request::get("/v1/health")
            .body(axum::body::Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, body) = send(&state, get("/v1/health", ALICE)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let health: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        health,
        json!({"status": "degraded", "mcp": [{"name": "gone", "required": false, "state": "down"}]})
    );

    let (_, body) = send(&state, get("/v1/health", ADMIN)).await;
    let health: Value = serde_json::from_str(&body).unwrap();
    let gone = &health["mcp"][0];
    assert_eq!(gone["state"], "down", "{health}");
    assert!(
        gone["error"]
            .as_str()
            .unwrap()
            .contains("/no/such/mcp-server"),
        "{health}"
    );
    // Not in the background tries (the toolbox starts those): restarted on a call.
    assert_eq!(gone["retry"], "next_call", "{health}");
    assert_eq!(gone["left_out"], json!([]), "{health}");
}

#[tokio::test]
async fn a_server_without_mcp_is_ok() {
    let (status, body) = send(&state(Vec::new()), get("/v1/health", ALICE)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        json!({"status": "ok", "mcp": []})
    );
}
