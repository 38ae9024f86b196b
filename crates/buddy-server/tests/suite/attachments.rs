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

/// Loopback and the metadata address in the spellings WHATWG URL parsers and glibc read
/// as them (issue 60, item 5: 38 of 102 such requests reached the model server).
const DISGUISED: [&str; 12] = [
    "https://127.1/x.png",
    "https://0x7f.1/x.png",
    "https://0177.0.0.1/x.png",
    "https://0251.0376.0251.0376/latest/meta-data/",
    "https://169.254.169.254./latest/meta-data/",
    "https://2852039166/latest/meta-data/",
    "https://１２７.０.０.１/x.png",
    "https://①②⑦.⓪.⓪.①/x.png",
    "https://%31%36%39.254.169.254/latest/meta-data/",
    "https://[::ffff:a9fe:a9fe]/latest/meta-data/",
    "https://ｌｏｃａｌｈｏｓｔ/x.png",
    "https://metadata.google.internal/computeMetadata/v1/",
];

#[tokio::test]
async fn loopback_and_metadata_in_disguise_are_refused_on_every_api() {
    for url in DISGUISED {
        let chat = json!({"model": "scripted:hello", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}]}]});
        let responses = json!({"model": "scripted:hello", "input": [{"role": "user", "content": [
            {"type": "input_image", "image_url": url}]}]});
        let items = json!({"items": [{"role": "user", "content": [
            {"type": "input_image", "image_url": url}]}]});
        let messages = json!({"model": "scripted:hello", "max_tokens": 100, "messages": [
            {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": url}}]}]});
        for (uri, body) in [
            ("/v1/chat/completions", chat),
            ("/v1/responses", responses),
            ("/v1/conversations", items),
            ("/v1/messages", messages),
        ] {
            let (status, message) = refused(uri, body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{uri} {url}: {message}");
            assert!(
                message.contains("local or private address"),
                "{uri} {url}: {message}"
            );
        }
    }
}

#[tokio::test]
async fn the_url_kept_and_forwarded_is_the_one_checked_not_the_clients_spelling() {
    let state = state(&[]);
    let items = json!({"items": [{"role": "user", "content": [
        {"type": "input_text", "text": "what is this?"},
        {"type": "input_image", "image_url": "HTTPS://ＥＸＡＭＰＬＥ.com:443/cat%2Dpic.png"}]}]});
    let (status, text) = send(&state, post("/v1/conversations", items, None)).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let id = serde_json::from_str::<Value>(&text).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let request = axum::http::Request::get(format!("/v1/conversations/{id}/items"))
        .body(axum::body::Body::empty())
        .unwrap();
    let (status, text) = send(&state, request).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(
        text.contains("\"https://example.com/cat%2Dpic.png\""),
        "{text}"
    );
    assert!(!text.contains("ＥＸＡＭＰＬＥ"), "{text}");
}
