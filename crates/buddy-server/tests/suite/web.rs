//! The chat page's files and the API parts it needs: served without a key, under a
//! strict Content-Security-Policy; conversations renamed; messages tied to their turn.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::{post, send, state};

#[tokio::test]
async fn the_page_and_its_files_are_served_with_a_strict_csp_and_no_key() {
    let state = state(&["sk-1"]);
    for (path, kind) in [
        ("/", "text/html"),
        ("/app.js", "text/javascript"),
        ("/style.css", "text/css"),
        ("/vendor/marked.umd.js", "text/javascript"),
        ("/vendor/purify.min.js", "text/javascript"),
    ] {
        let response = buddy_server::app(state.clone())
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let headers = response.headers();
        assert!(headers["content-type"].to_str().unwrap().starts_with(kind));
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"));
        assert!(!csp.contains("unsafe"), "{csp}");
        assert_eq!(headers["x-content-type-options"], "nosniff");
    }
    let (_, html) = send(&state, Request::get("/").body(Body::empty()).unwrap()).await;
    assert!(
        !html.contains("<script>") && !html.contains(" onclick="),
        "no inline code"
    );
}

#[tokio::test]
async fn a_conversation_can_be_renamed_and_its_messages_name_their_turn() {
    let state = state(&["sk-1"]);
    let (_, body) = send(
        &state,
        post("/v1/chat", json!({"message": "hi"}), Some("sk-1")),
    )
    .await;
    let id = body
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .and_then(|d| serde_json::from_str::<Value>(d).ok())
        .and_then(|v| v["conversation_id"].as_str().map(str::to_owned))
        .unwrap();
    let rename = |title: Value, key: Option<&str>| {
        let mut builder = Request::patch(format!("/v1/conversations/{id}"))
            .header("content-type", "application/json");
        if let Some(key) = key {
            builder = builder.header("authorization", format!("Bearer {key}"));
        }
        builder
            .body(Body::from(json!({"title": title}).to_string()))
            .unwrap()
    };
    let (status, _) = send(&state, rename(json!("Greeting"), Some("sk-1"))).await;
    assert_eq!(status, StatusCode::OK);
    for bad in [json!(""), json!("x".repeat(201)), json!(3)] {
        let (status, _) = send(&state, rename(bad, Some("sk-1"))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
    let (status, _) = send(&state, rename(json!("x"), None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let get = || {
        Request::get(format!("/v1/conversations/{id}"))
            .header("authorization", "Bearer sk-1")
            .body(Body::empty())
            .unwrap()
    };
    let (_, detail) = send(&state, get()).await;
    let detail: Value = serde_json::from_str(&detail).unwrap();
    assert_eq!(detail["title"], "Greeting");
    let turn = detail["turns"][0]["id"].as_str().unwrap();
    let messages = detail["messages"].as_array().unwrap().len();
    let turns: Vec<&str> = detail["message_turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(turns, vec![turn; messages]);
    let (_, list) = send(
        &state,
        Request::get("/v1/conversations")
            .header("authorization", "Bearer sk-1")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert!(list.contains("\"title\":\"Greeting\""), "{list}");
}

#[tokio::test]
async fn a_search_finds_conversations_holding_each_word_in_any_order_ignoring_case() {
    let state = state(&["sk-1"]);
    let (_, body) = send(
        &state,
        post("/v1/chat", json!({"message": "hi"}), Some("sk-1")),
    )
    .await;
    assert!(body.contains("Hello there."), "{body}");
    let found = |q: &'static str| {
        let state = state.clone();
        async move {
            let request = Request::get(format!("/v1/conversations?q={q}"))
                .header("authorization", "Bearer sk-1")
                .body(Body::empty())
                .unwrap();
            let (status, body) = send(&state, request).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            let body: Value = serde_json::from_str(&body).unwrap();
            body["data"].as_array().unwrap().len()
        }
    };
    // Words of the title and of the answer, in another order and case: found.
    assert_eq!(found("THERE%20hi").await, 1);
    assert_eq!(found("%20there%20%20hello%20").await, 1);
    // One word nowhere: not found; the phrase is not needed, each word is.
    assert_eq!(found("hello%20zebra").await, 0);
    assert_eq!(found("there%20hello").await, 1);
    assert_eq!(found("%20").await, 1);
}
