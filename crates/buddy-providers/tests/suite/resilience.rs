//! Retries, backoff, Retry-After, no retry after tokens, cancellation.

use std::time::{Duration, Instant};

use buddy_core::{CompletionRequest, Message, Provider, ProviderError, Token};
use buddy_testkit::{End, MockResponse, MockServer, anthropic_sse, openai_sse};
use futures::StreamExt;

use super::{anthropic, complete, fixture, openai, quick_http, tokens};

fn with_retries(n: u32) -> buddy_providers::HttpSettings {
    let mut http = quick_http();
    http.max_retries = n;
    http
}

#[tokio::test]
async fn errors_before_any_token_are_retried_then_succeed() {
    let server = MockServer::sequence(vec![
        MockResponse::status(503, "text/plain", "busy"),
        MockResponse::json(429, &serde_json::json!({"error": {"message": "slow down"}}))
            .header("retry-after", "0"),
        MockResponse::sse(openai_sse("third time lucky", &[])),
    ])
    .await;
    let completion = complete(&openai(&server.url(), with_retries(3)))
        .await
        .unwrap();
    assert_eq!(completion.text, "third time lucky");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_retryable_error_event_before_the_first_token_is_retried() {
    let server = MockServer::sequence(vec![
        MockResponse::sse(fixture("anthropic_overloaded_error.sse")),
        MockResponse::sse(anthropic_sse("recovered", &[])),
    ])
    .await;
    let completion = complete(&anthropic(&server.url(), with_retries(2)))
        .await
        .unwrap();
    assert_eq!(completion.text, "recovered");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn retries_give_up_after_max_retries_and_say_why() {
    let server = MockServer::always(MockResponse::status(500, "text/plain", "still broken")).await;
    let error = complete(&openai(&server.url(), with_retries(2)))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("HTTP 500") && error.to_string().contains("still broken"));
    assert_eq!(server.requests().len(), 3, "one try and two retries");
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = MockServer::always(MockResponse::status(
        400,
        "application/json",
        r#"{"error":{"message":"bad"}}"#,
    ))
    .await;
    let error = complete(&openai(&server.url(), with_retries(3)))
        .await
        .unwrap_err();
    assert!(matches!(error, ProviderError::Http { status: 400, .. }));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_retry_after_longer_than_allowed_is_not_waited_for() {
    let server = MockServer::always(
        MockResponse::status(429, "text/plain", "later").header("retry-after", "3600"),
    )
    .await;
    let started = Instant::now();
    let error = complete(&openai(&server.url(), with_retries(3)))
        .await
        .unwrap_err();
    assert!(matches!(
        error,
        ProviderError::Http {
            status: 429,
            retry_after: Some(_),
            ..
        }
    ));
    assert_eq!(server.requests().len(), 1);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let server = MockServer::sequence(vec![
        MockResponse::status(429, "text/plain", "wait").header("retry-after", "0.4"),
        MockResponse::sse(openai_sse("ok", &[])),
    ])
    .await;
    let started = Instant::now();
    complete(&openai(&server.url(), with_retries(1)))
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "waited as the server asked"
    );
}

#[tokio::test]
async fn no_retry_once_tokens_reached_the_client() {
    let body = openai_sse("This answer starts fine and then", &[]);
    let cut = body.match_indices("\n\n").nth(2).unwrap().0 + 2;
    let server =
        MockServer::always(MockResponse::sse(body.as_bytes()[..cut].to_vec()).ending(End::Drop))
            .await;
    let (tokens, error) = tokens(&openai(&server.url(), with_retries(3))).await;
    assert!(tokens.iter().any(|t| matches!(t, Token::Text { .. })));
    assert!(error.is_some());
    assert_eq!(
        server.requests().len(),
        1,
        "a retry would duplicate text the client already has"
    );
}

#[tokio::test]
async fn dropping_the_stream_drops_the_request() {
    let body = openai_sse("a long answer that is still being written", &[]);
    // The role chunk and two text chunks, then silence.
    let cut = body.match_indices("\n\n").nth(2).unwrap().0 + 2;
    let server =
        MockServer::always(MockResponse::sse(body.as_bytes()[..cut].to_vec()).ending(End::Stall))
            .await;
    let provider = openai(&server.url(), quick_http());
    let history = [Message::user("hi")];
    let mut stream = provider
        .stream(CompletionRequest::new("m", &history))
        .await
        .unwrap();
    let first = loop {
        match stream.next().await {
            // The reply's id and model come first; the text is what this test waits for.
            Some(Ok(Token::Response(_))) => continue,
            other => break other,
        }
    };
    assert!(matches!(first, Some(Ok(Token::Text { .. }))));
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.hangups() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.hangups(), 1, "the server saw the client leave");
}
