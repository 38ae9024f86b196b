//! The official Anthropic Python SDK against `buddy serve` (issue 54, item 5): create,
//! stream, a client tool's round trip, count_tokens, the model list and errors, through
//! `POST /v1/messages` (scripts/anthropic_sdk_check.py); and the TypeScript SDK
//! (`@anthropic-ai/sdk`, clients/node/anthropic-check.mjs).

use buddy_server::ServerSettings;

use super::server::{TestServer, all_scenarios, run_client};

#[tokio::test(flavor = "multi_thread")]
async fn the_anthropic_python_sdk_works_against_the_server() {
    let python = std::env::var("BUDDY_ANTHROPIC_PYTHON").unwrap_or_else(|_| {
        panic!("BUDDY_ANTHROPIC_PYTHON is not set: run the suite with scripts/test.sh (or eval \"$(bash scripts/anthropic-sdk.sh)\"), which installs the anthropic SDK")
    });
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let settings = ServerSettings {
        api_keys: vec![buddy_server::ApiKey::new("sk-buddy-anthropic", None, false)],
        ..ServerSettings::default()
    };
    let server = TestServer::start(&db.path().join("a.db"), scenarios.path(), settings).await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/anthropic_sdk_check.py"
    );
    let args = vec![
        script.into(),
        server.url.clone(),
        "sk-buddy-anthropic".into(),
    ];
    let stdout = run_client(python, args).await;
    assert!(
        stdout.contains("anthropic sdk: all checks passed"),
        "{stdout}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_anthropic_typescript_sdk_works_against_the_server() {
    let clients = std::env::var("BUDDY_NODE_CLIENTS").unwrap_or_else(|_| {
        panic!("BUDDY_NODE_CLIENTS is not set: run the suite with scripts/test.sh, which installs clients/node (npm ci)")
    });
    let (db, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let settings = ServerSettings {
        api_keys: vec![buddy_server::ApiKey::new("sk-buddy-anthropic", None, false)],
        ..ServerSettings::default()
    };
    let server = TestServer::start(&db.path().join("t.db"), scenarios.path(), settings).await;
    let args = vec![
        format!("{clients}/anthropic-check.mjs"),
        server.url.clone(),
        "sk-buddy-anthropic".into(),
    ];
    let stdout = run_client("node".into(), args).await;
    assert!(
        stdout.contains("anthropic ts sdk: all checks passed"),
        "{stdout}"
    );
    server.stop().await;
}
