//! OAuth for HTTP MCP servers against a loopback authorization server and MCP server
//! in one (axum): the first start sends a (headless) browser through the authorization
//! code flow, the token is kept on disk and reused by a later run without a browser,
//! a revoked token is refreshed silently, a step-up asks for the union of scopes, and
//! an unattended start or a refused authorization fails saying why.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use buddy_mcp::{HeadlessBrowser, McpServerConfig, McpSource};
use serde_json::{Value, json};

/// What the fake servers were asked, and what they hold.
#[derive(Default)]
struct Seen {
    registrations: u32,
    /// The `scope` of each authorization request.
    authorizations: Vec<String>,
    refreshes: u32,
    /// Valid access tokens and their scopes.
    tokens: BTreeMap<String, BTreeSet<String>>,
    refresh_tokens: BTreeMap<String, BTreeSet<String>>,
    /// Codes handed out, with their scopes.
    codes: BTreeMap<String, BTreeSet<String>>,
    issued: u32,
    /// Answer the authorization page with `error=access_denied`.
    deny: bool,
    /// Refuse `publish` whatever the token's scopes.
    never_write: bool,
}

#[derive(Clone)]
struct Fake {
    base: String,
    seen: Arc<Mutex<Seen>>,
}

impl Fake {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().expect("lock")
    }

    fn challenge(&self, extra: &str) -> String {
        format!(
            r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource/mcp"{extra}"#,
            self.base
        )
    }
}

fn form(body: &[u8]) -> BTreeMap<String, String> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

async fn protected_resource(State(fake): State<Fake>) -> Response {
    axum::Json(json!({
        "resource": format!("{}/mcp", fake.base),
        "authorization_servers": [fake.base],
        "scopes_supported": ["read"],
    }))
    .into_response()
}

async fn authorization_server(State(fake): State<Fake>) -> Response {
    axum::Json(json!({
        "issuer": fake.base,
        "authorization_endpoint": format!("{}/authorize", fake.base),
        "token_endpoint": format!("{}/token", fake.base),
        "registration_endpoint": format!("{}/register", fake.base),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
    }))
    .into_response()
}

async fn register(State(fake): State<Fake>, body: Bytes) -> Response {
    fake.seen().registrations += 1;
    let asked: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (
        StatusCode::CREATED,
        axum::Json(json!({"client_id": "buddy-client", "redirect_uris": asked["redirect_uris"]})),
    )
        .into_response()
}

/// Approves at once: back to the redirect URI with a code (or a refusal).
async fn authorize(
    State(fake): State<Fake>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let redirect = query.get("redirect_uri").cloned().unwrap_or_default();
    let state = query.get("state").cloned().unwrap_or_default();
    let scope = query.get("scope").cloned().unwrap_or_default();
    let mut seen = fake.seen();
    seen.authorizations.push(scope.clone());
    let location = if seen.deny {
        format!("{redirect}?error=access_denied&error_description=the+user+said+no&state={state}")
    } else {
        seen.issued += 1;
        let code = format!("code{}", seen.issued);
        seen.codes.insert(
            code.clone(),
            scope.split_whitespace().map(str::to_owned).collect(),
        );
        format!("{redirect}?code={code}&state={state}")
    };
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

async fn token(State(fake): State<Fake>, body: Bytes) -> Response {
    let asked = form(&body);
    let mut seen = fake.seen();
    let scopes = match asked.get("grant_type").map(String::as_str) {
        Some("authorization_code") => asked.get("code").and_then(|c| seen.codes.remove(c)),
        Some("refresh_token") => {
            seen.refreshes += 1;
            asked
                .get("refresh_token")
                .and_then(|r| seen.refresh_tokens.get(r).cloned())
        }
        _ => None,
    };
    let Some(scopes) = scopes else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_grant"})),
        )
            .into_response();
    };
    seen.issued += 1;
    let access = format!("access{}", seen.issued);
    let refresh = format!("refresh{}", seen.issued);
    seen.tokens.insert(access.clone(), scopes.clone());
    seen.refresh_tokens.insert(refresh.clone(), scopes.clone());
    let scope: Vec<&str> = scopes.iter().map(String::as_str).collect();
    (
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(
            json!({"access_token": access, "token_type": "Bearer", "expires_in": 3600,
            "refresh_token": refresh, "scope": scope.join(" ")}),
        ),
    )
        .into_response()
}

/// A legacy (initialize) MCP server with `whoami` (scope `read`) and `publish` (scope
/// `write`, asked for by a step-up).
async fn mcp(State(fake): State<Fake>, headers: HeaderMap, body: Bytes) -> Response {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let scopes = bearer.and_then(|t| fake.seen().tokens.get(&t).cloned());
    let never_write = fake.seen().never_write;
    let Some(scopes) = scopes else {
        return (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                fake.challenge(r#", scope="read""#),
            )],
        )
            .into_response();
    };
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = message.get("id").cloned();
    let method = message["method"].as_str().unwrap_or_default();
    let Some(id) = id else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match method {
        "initialize" => json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "guarded", "version": "1"}}),
        "tools/list" => json!({"tools": [
            {"name": "whoami", "inputSchema": {"type": "object"}},
            {"name": "publish", "inputSchema": {"type": "object"}}]}),
        "tools/call"
            if message["params"]["name"] == "publish"
                && (never_write || !scopes.contains("write")) =>
        {
            return (
                StatusCode::FORBIDDEN,
                [(
                    header::WWW_AUTHENTICATE,
                    fake.challenge(r#", error="insufficient_scope", scope="write""#),
                )],
            )
                .into_response();
        }
        "tools/call" => {
            let scope: Vec<&str> = scopes.iter().map(String::as_str).collect();
            json!({"content": [{"type": "text", "text": format!("scopes: {}", scope.join(" "))}]})
        }
        _ => {
            return axum::Json(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "no such method"}}))
            .into_response();
        }
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

async fn serve() -> Fake {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!(
        "http://127.0.0.1:{}",
        listener.local_addr().expect("addr").port()
    );
    let fake = Fake {
        base,
        seen: Arc::default(),
    };
    let app = Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(protected_resource),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(authorization_server),
        )
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .route(
            "/mcp",
            post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
        )
        .with_state(fake.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    fake
}

fn source(fake: &Fake, dir: &std::path::Path, browser: bool) -> Arc<McpSource> {
    let mut config = McpServerConfig::http("guarded", &format!("{}/mcp", fake.base));
    config.credentials_dir = Some(dir.to_path_buf());
    config.startup_timeout_secs = 10.0;
    config.call_timeout_secs = 10.0;
    config.oauth.wait_secs = 10.0;
    let source = McpSource::new(config);
    if browser {
        source.set_browser(Arc::new(HeadlessBrowser));
    }
    source
}

#[tokio::test]
async fn the_first_start_authorizes_and_a_later_run_reuses_the_kept_token() {
    let fake = serve().await;
    let dir = tempfile::tempdir().expect("dir");
    let first = source(&fake, dir.path(), true);
    let tools = first.start().await.expect("authorized and started");
    assert_eq!(tools.len(), 2);
    assert_eq!(
        first.call("whoami", json!({})).await.expect("call"),
        "scopes: read"
    );
    assert_eq!(fake.seen().registrations, 1);
    assert_eq!(
        fake.seen().authorizations,
        vec!["read".to_owned()],
        "the challenge's scope"
    );
    let kept = dir.path().join("guarded.json");
    let text = std::fs::read_to_string(&kept).expect("the token is kept");
    assert!(
        text.contains("access") && text.contains(&fake.base),
        "{text}"
    );
    // A later run with nobody at the terminal: the kept token is enough.
    let later = source(&fake, dir.path(), false);
    later.start().await.expect("started with the kept token");
    assert_eq!(
        later.call("whoami", json!({})).await.expect("call"),
        "scopes: read"
    );
    assert_eq!(
        fake.seen().authorizations.len(),
        1,
        "no second authorization"
    );
    // Logging out forgets it: the next unattended start must ask again.
    later.logout().await.expect("logout");
    assert!(!kept.exists());
    let error = source(&fake, dir.path(), false)
        .start()
        .await
        .expect_err("no token");
    assert!(
        error.to_string().contains("buddy mcp login guarded"),
        "{error}"
    );
}

#[tokio::test]
async fn unattended_without_a_token_the_error_says_to_log_in() {
    let fake = serve().await;
    let dir = tempfile::tempdir().expect("dir");
    let error = source(&fake, dir.path(), false)
        .start()
        .await
        .expect_err("unauthorized");
    let message = error.to_string();
    assert!(
        message.contains("MCP server `guarded` asks for OAuth authorization")
            && message.contains("run `buddy mcp login guarded`"),
        "{message}"
    );
    assert!(fake.seen().authorizations.is_empty());
}

#[tokio::test]
async fn a_revoked_token_is_refreshed_without_the_browser() {
    let fake = serve().await;
    let dir = tempfile::tempdir().expect("dir");
    source(&fake, dir.path(), true)
        .start()
        .await
        .expect("authorized");
    // The server forgets every access token (they expired, or were revoked).
    fake.seen().tokens.clear();
    let later = source(&fake, dir.path(), false);
    later.start().await.expect("started after a refresh");
    assert_eq!(
        later.call("whoami", json!({})).await.expect("call"),
        "scopes: read"
    );
    assert_eq!(fake.seen().refreshes, 1);
    assert_eq!(fake.seen().authorizations.len(), 1);
}

#[tokio::test]
async fn a_step_up_asks_for_the_old_scopes_with_the_new_one_and_the_call_goes_through() {
    let fake = serve().await;
    let dir = tempfile::tempdir().expect("dir");
    let source = source(&fake, dir.path(), true);
    source.start().await.expect("authorized");
    let answer = source.call("publish", json!({})).await.expect("stepped up");
    assert_eq!(answer, "scopes: read write");
    let asked = fake.seen().authorizations.clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    let second: BTreeSet<&str> = asked[1].split_whitespace().collect();
    assert!(
        second.contains("read") && second.contains("write"),
        "{asked:?}"
    );
}

#[tokio::test]
async fn a_step_up_is_tried_once_per_call() {
    let fake = serve().await;
    fake.seen().never_write = true;
    let dir = tempfile::tempdir().expect("dir");
    let source = source(&fake, dir.path(), true);
    source.start().await.expect("authorized");
    let error = source
        .call("publish", json!({}))
        .await
        .expect_err("refused");
    assert!(
        error
            .to_string()
            .contains("refused the call to `publish` for want of authorization"),
        "{error}"
    );
    assert_eq!(
        fake.seen().authorizations.len(),
        2,
        "one step-up, not a loop"
    );
    // The next call gets its own step-up.
    source
        .call("publish", json!({}))
        .await
        .expect_err("refused again");
    assert_eq!(fake.seen().authorizations.len(), 3);
}

#[tokio::test]
async fn a_refused_authorization_fails_with_the_servers_reason() {
    let fake = serve().await;
    fake.seen().deny = true;
    let dir = tempfile::tempdir().expect("dir");
    let error = source(&fake, dir.path(), true)
        .start()
        .await
        .expect_err("refused");
    let message = error.to_string();
    assert!(
        message.contains("access_denied") && message.contains("the user said no"),
        "{message}"
    );
    assert!(!dir.path().join("guarded.json").exists(), "nothing kept");
}

#[tokio::test]
async fn calls_made_together_need_one_step_up() {
    let fake = serve().await;
    let dir = tempfile::tempdir().expect("dir");
    let source = source(&fake, dir.path(), true);
    source.start().await.expect("authorized");
    let calls = (0..4).map(|_| {
        let source = Arc::clone(&source);
        tokio::spawn(async move { source.call("publish", json!({})).await })
    });
    for call in calls {
        let answer = call.await.expect("join").expect("stepped up");
        assert_eq!(answer, "scopes: read write");
    }
    assert_eq!(
        fake.seen().authorizations.len(),
        2,
        "the first authorization and one step-up: {:?}",
        fake.seen().authorizations
    );
}
