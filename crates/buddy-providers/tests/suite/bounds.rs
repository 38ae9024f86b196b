//! A hostile or broken model server against the bounds of one model call: every case
//! ends with a typed error naming the bound and its value, having read no more than the
//! bound allows (the fault server would send far more).

use std::time::Duration;

use buddy_core::ProviderError;
use buddy_providers::HttpSettings;
use buddy_testkit::{MockResponse, MockServer, Piece};

use super::{endless, openai, quick_http, text_chunk, tokens};

fn bounded(settings: HttpSettings) -> HttpSettings {
    HttpSettings {
        idle_timeout_secs: 5.0,
        ..settings
    }
}

/// Most body bytes the server may get out before buddy stops reading, beyond the bound
/// itself: what the loopback socket buffers hold.
const SOCKET_SLACK: usize = 16 * 1024 * 1024;

async fn error_of(server: &MockServer, http: HttpSettings) -> ProviderError {
    let bound = http.max_reply_bytes.min(http.max_event_bytes);
    let (_, error) = tokens(&openai(&server.url(), http)).await;
    let error = error.expect("the call must end with an error");
    // The server would send ~60 MB; buddy stopped reading near the bound.
    let sent = server.body_bytes_sent();
    assert!(
        sent < bound + SOCKET_SLACK,
        "buddy read on: {sent} bytes sent for a bound of {bound}"
    );
    error
}

#[tokio::test]
async fn endless_text_ends_at_max_reply_bytes() {
    // ~64 MB would come; the bound is 256 KiB.
    let chunk = text_chunk(&"a".repeat(1000));
    let server = MockServer::always(endless("", &chunk, 60_000, Duration::ZERO)).await;
    let http = bounded(HttpSettings {
        max_reply_bytes: 256 * 1024,
        ..quick_http()
    });
    let text = error_of(&server, http).await.to_string();
    assert!(
        text.contains("max_reply_bytes = 262144"),
        "names the bound: {text}"
    );
}

#[tokio::test]
async fn data_lines_with_no_blank_line_end_at_max_event_bytes() {
    let line = format!("data: {}\n", "x".repeat(1000));
    let server = MockServer::always(endless("", &line, 60_000, Duration::ZERO)).await;
    let http = bounded(HttpSettings {
        max_event_bytes: 64 * 1024,
        ..quick_http()
    });
    let text = error_of(&server, http).await.to_string();
    assert!(text.contains("max_event_bytes"), "{text}");
}

#[tokio::test]
async fn endless_tool_call_arguments_end_at_max_reply_bytes() {
    let head = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n";
    let piece = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":\"{}\"}}}}]}},\"finish_reason\":null}}]}}\n\n",
        "y".repeat(1000)
    );
    let server = MockServer::always(endless(head, &piece, 60_000, Duration::ZERO)).await;
    let http = bounded(HttpSettings {
        max_reply_bytes: 256 * 1024,
        ..quick_http()
    });
    let text = error_of(&server, http).await.to_string();
    assert!(text.contains("max_reply_bytes"), "{text}");
}

#[tokio::test]
async fn keep_alive_comments_do_not_extend_the_call() {
    // A comment every 200 ms keeps the idle timer happy; the call limit still holds.
    let server = MockServer::always(endless(
        &text_chunk("Hello"),
        ": keep-alive\n\n",
        1_000,
        Duration::from_millis(200),
    ))
    .await;
    let http = bounded(HttpSettings {
        call_timeout_secs: 1.0,
        ..quick_http()
    });
    let error = error_of(&server, http).await;
    assert!(
        error.to_string().contains("call_timeout_secs = 1"),
        "{error}"
    );
}

#[tokio::test]
async fn keep_alive_comments_alone_end_at_the_idle_timeout() {
    // After one token, only comments: the idle timeout (1 s) ends the call, not the much
    // later call limit (600 s) a comment every 200 ms would otherwise stretch to.
    let server = MockServer::always(endless(
        &text_chunk("Hello"),
        ": keep-alive\n\n",
        1_000,
        Duration::from_millis(200),
    ))
    .await;
    let http = HttpSettings {
        idle_timeout_secs: 1.0,
        call_timeout_secs: 600.0,
        ..quick_http()
    };
    let error = error_of(&server, http).await;
    assert!(
        matches!(&error, ProviderError::Timeout { phase, after, .. } if phase == "next chunk" && *after == Duration::from_secs(1)),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_non_streamed_body_that_never_ends_stops_at_max_body_bytes() {
    let mut response = MockResponse::status(
        200,
        "application/json",
        "{\"choices\":[{\"message\":{\"content\":\"",
    );
    response.pieces.push(Piece::Repeat {
        bytes: vec![b'z'; 64 * 1024],
        times: 1_000,
        pause: Duration::ZERO,
    });
    let server = MockServer::always(response).await;
    let mut provider_http = quick_http();
    provider_http.max_body_bytes = 1024 * 1024;
    let provider = buddy_providers::OpenAiProvider::new(buddy_providers::OpenAiOptions {
        base_url: format!("{}/v1", server.url()),
        api_key: Some("sk-test".into()),
        http: provider_http,
        stream: false,
        ..Default::default()
    })
    .unwrap();
    let (_, error) = tokens(&provider).await;
    let text = error.expect("an error").to_string();
    assert!(text.contains("max_body_bytes = 1048576"), "{text}");
}
