//! Image and file URLs a client sends (issue 46, item 7): only `https:` to a public host
//! and well-formed `data:` URLs reach a model server; anything else is a 400 naming the
//! part, through both OpenAI APIs and the Conversations API alike — a model server that
//! fetches URLs never reaches into the operator's network for a client.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{post, send, state};

/// URLs an attacker would send, and the words the refusal must hold.
const REFUSED: [(&str, &str); 8] = [
    (
        "http://169.254.169.254/latest/meta-data/iam",
        "`http:` URLs are not taken",
    ),
    ("http://127.0.0.1:8080/admin", "`http:` URLs are not taken"),
    ("file:///etc/passwd", "`file:` URLs are not taken"),
    (
        "gopher://127.0.0.1:6379/_FLUSHALL",
        "`gopher:` URLs are not taken",
    ),
    (
        "https://169.254.169.254/latest/meta-data/",
        "local or private address",
    ),
    ("https://[::1]/x.png", "local or private address"),
    (
        "data:image/png;base64,not base64!",
        "data: URL is malformed",
    ),
    ("data:text/html;base64,PGgxPg==", "image/"),
];

/// The refusal of `body` at `uri`: its status and message.
async fn refused(uri: &str, body: Value) -> (StatusCode, String) {
    let (status, text) = send(&state(&[]), post(uri, body, None)).await;
    let error: Value = serde_json::from_str(&text).unwrap_or_default();
    (
        status,
        error["error"]["message"]
            .as_str()
            .unwrap_or(&text)
            .to_owned(),
    )
}

#[tokio::test]
async fn image_urls_outside_https_and_data_are_refused_naming_the_part() {
    for (url, says) in REFUSED {
        let chat = json!({"model": "scripted:hello", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": url}}]}]});
        let responses = json!({"model": "scripted:hello", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "what is this?"},
            {"type": "input_image", "image_url": url}]}]});
        let items = json!({"items": [{"role": "user", "content": [
            {"type": "input_image", "image_url": url}]}]});
        for (uri, body, part) in [
            ("/v1/chat/completions", chat, "part 1: image_url"),
            ("/v1/responses", responses, "part 1: image_url"),
            ("/v1/conversations", items, "part 0: image_url"),
        ] {
            let (status, message) = refused(uri, body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{uri} {url}: {message}");
            assert!(
                message.contains(part) && message.contains(says),
                "{uri} {url}: {message}"
            );
        }
    }
}

#[tokio::test]
async fn a_file_must_be_a_well_formed_data_url() {
    for (data, says) in [
        ("https://example.com/a.pdf", "a file must be a data: URL"),
        ("data:application/pdf,JVBERi0=", "not base64"),
        ("data:application/pdf;base64,%PDF", "not base64"),
    ] {
        let body = json!({"model": "scripted:hello", "messages": [{"role": "user", "content": [
            {"type": "file", "file": {"filename": "a.pdf", "file_data": data}}]}]});
        let (status, message) = refused("/v1/chat/completions", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{data}: {message}");
        assert!(
            message.contains("part 0: file_data") && message.contains(says),
            "{data}: {message}"
        );
    }
}
