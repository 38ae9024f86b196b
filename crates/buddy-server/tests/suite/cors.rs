//! Browser pages on other origins (`[server] cors_origins`, issue 58 item 8): a listed
//! origin's preflight is answered on every API family's routes before auth asks for a
//! key, and its responses are readable with buddy's own headers; an unlisted origin, and
//! every origin when none is listed, gets no CORS answer.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use buddy_server::{ApiKey, ServerSettings};
use serde_json::json;

use super::messages::{calls_bash, send, server_on};

const KEY: &str = "sk-cors";
const PAGE: &str = "https://app.example.com";

fn settings(origins: &[&str]) -> ServerSettings {
    ServerSettings {
        api_keys: vec![ApiKey::new(KEY, None, false)],
        cors_origins: origins.iter().map(|o| (*o).to_owned()).collect(),
        ..ServerSettings::default()
    }
}

fn preflight(path: &str, origin: &str) -> Request<Body> {
    Request::options(path)
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type, anthropic-version",
        )
        .body(Body::empty())
        .unwrap()
}

fn store() -> std::sync::Arc<dyn buddy_store::Store> {
    std::sync::Arc::new(buddy_store::SqliteStore::in_memory().unwrap())
}

#[tokio::test]
async fn a_listed_origins_preflight_is_answered_on_every_api_and_its_answers_are_readable() {
    let (state, _) = server_on(store(), settings(&[PAGE]), calls_bash);
    for path in [
        "/v1/chat",
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/v1/conversations",
    ] {
        let sent = send(&state, preflight(path, PAGE)).await;
        assert!(sent.status.is_success(), "{path}: {}", sent.status);
        assert_eq!(sent.headers["access-control-allow-origin"], PAGE, "{path}");
        let allowed = sent.headers["access-control-allow-headers"]
            .to_str()
            .unwrap();
        assert!(allowed.contains("authorization"), "{path}: {allowed}");
    }
    let body = json!({"model": "claude-test", "max_tokens": 50,
                      "messages": [{"role": "user", "content": "hi"}]});
    let request = Request::post("/v1/messages")
        .header("origin", PAGE)
        .header("content-type", "application/json")
        .header("x-api-key", KEY)
        .body(Body::from(body.to_string()))
        .unwrap();
    let sent = send(&state, request).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    assert_eq!(sent.headers["access-control-allow-origin"], PAGE);
    let exposed = sent.headers["access-control-expose-headers"]
        .to_str()
        .unwrap();
    assert!(exposed.contains("buddy-stop-reason"), "{exposed}");
    // The key is still asked for: CORS opens the door to reading, not to the API.
    let unauthenticated = Request::post("/v1/chat/completions")
        .header("origin", PAGE)
        .header("content-type", "application/json")
        .body(Body::from("{}"))
        .unwrap();
    assert_eq!(
        send(&state, unauthenticated).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn an_unlisted_origin_and_a_server_listing_none_give_no_cors_answer() {
    for (listed, origin) in [(&[PAGE][..], "https://evil.example.net"), (&[][..], PAGE)] {
        let (state, _) = server_on(store(), settings(listed), calls_bash);
        let sent = send(&state, preflight("/v1/chat/completions", origin)).await;
        assert!(
            !sent.headers.contains_key("access-control-allow-origin"),
            "{listed:?} {origin}: {:?}",
            sent.headers
        );
    }
}
