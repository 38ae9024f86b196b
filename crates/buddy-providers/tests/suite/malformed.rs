//! Malformed input never panics and never hangs: each case is a clear ProviderError.

use std::time::{Duration, Instant};

use buddy_core::{ProviderError, Token};
use buddy_testkit::{End, MockResponse, MockServer, Piece, anthropic_sse, openai_sse};

use super::{anthropic, fixture, openai, quick_http, tokens};

/// The OpenAI parallel-calls recording cut in the middle of the second call's arguments.
fn cut_mid_call() -> Vec<u8> {
    let body = fixture("openai_parallel_tool_calls.sse");
    let text = String::from_utf8(body).unwrap();
    let at = text.find("\"exch").expect("the second call's arguments");
    let line_end = text[at..].find("\n\n").unwrap() + at + 2;
    text.as_bytes()[..line_end].to_vec()
}

#[tokio::test]
async fn a_stream_that_ends_mid_tool_call_never_yields_the_call() {
    let server = MockServer::always(MockResponse::sse(cut_mid_call())).await;
    let (tokens, error) = tokens(&openai(&server.url(), quick_http())).await;
    assert!(
        !tokens.iter().any(|t| matches!(t, Token::ToolCall(_))),
        "{tokens:?}"
    );
    let error = error.expect("an error");
    assert!(
        error
            .to_string()
            .contains("ended in the middle of tool call `get_stock_price`"),
        "{error}"
    );
}

#[tokio::test]
async fn a_connection_that_breaks_mid_body_is_an_error_not_a_short_answer() {
    let server = MockServer::always(MockResponse::sse(cut_mid_call()).ending(End::Drop)).await;
    let (got, error) = tokens(&openai(&server.url(), quick_http())).await;
    assert!(
        !got.iter()
            .any(|t| matches!(t, Token::ToolCall(_) | Token::Finish { .. }))
    );
    let error = error.expect("an error");
    assert!(error.to_string().contains("connection broke"), "{error}");

    let body = anthropic_sse(
        "Let me check.",
        &[("toolu_1", "get_weather", r#"{"city":"Paris"}"#)],
    );
    // Cut just before the tool block's stop: no stop, no message_delta, no message_stop.
    let cut = &body.as_bytes()[..body.rfind("event: content_block_stop").unwrap()];
    let server = MockServer::always(MockResponse::sse(cut.to_vec())).await;
    let (got, error) = tokens(&anthropic(&server.url(), quick_http())).await;
    assert!(!got.iter().any(|t| matches!(t, Token::ToolCall(_))));
    assert!(
        error
            .expect("an error")
            .to_string()
            .contains("ended in the middle of tool call `get_weather`")
    );
}

#[tokio::test]
async fn invalid_json_in_a_data_line_is_malformed() {
    for (body, anthropic_kind) in [
        ("data: {\"choices\": [\n\n".to_owned(), false),
        ("data: not json at all\n\n".to_owned(), false),
        ("event: message_start\ndata: {oops}\n\n".to_owned(), true),
    ] {
        let server = MockServer::always(MockResponse::sse(body.clone())).await;
        let (_, error) = if anthropic_kind {
            tokens(&anthropic(&server.url(), quick_http())).await
        } else {
            tokens(&openai(&server.url(), quick_http())).await
        };
        match error {
            Some(ProviderError::Malformed { message, url, .. }) => {
                assert!(message.contains("not valid JSON"), "{message}");
                assert!(url.starts_with("http://127.0.0.1"), "{url}");
            }
            other => panic!("{body:?}: expected Malformed, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn an_error_object_inside_a_chunk_is_a_stream_error() {
    let body =
        "data: {\"error\": {\"message\": \"model overloaded\", \"type\": \"server_error\"}}\n\n";
    let server = MockServer::always(MockResponse::sse(body)).await;
    let (_, error) = tokens(&openai(&server.url(), quick_http())).await;
    match error {
        Some(e @ ProviderError::Stream { .. }) => {
            assert!(e.to_string().contains("model overloaded"), "{e}");
            assert!(e.is_retryable(), "server_error may be retried");
        }
        other => panic!("expected Stream, got {other:?}"),
    }
}

#[tokio::test]
async fn a_body_that_stops_sending_hits_the_idle_timeout() {
    let body = openai_sse("Hello there, this answer will stall", &[]);
    let mut response = MockResponse::sse(body.as_bytes()[..120].to_vec()).ending(End::Stall);
    response.pieces.insert(0, Piece::Pause(Duration::ZERO));
    let server = MockServer::always(response).await;
    let mut http = quick_http();
    http.idle_timeout_secs = 0.3;
    let started = Instant::now();
    let (_, error) = tokens(&openai(&server.url(), http)).await;
    match error {
        Some(ProviderError::Timeout { phase, after, .. }) => {
            assert_eq!(phase, "next chunk");
            assert_eq!(after, Duration::from_millis(300));
        }
        other => panic!("expected an idle timeout, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "bounded by the test's own timeout too"
    );
}

#[tokio::test]
async fn a_server_that_never_sends_a_byte_hits_the_first_byte_timeout() {
    let response = MockResponse::sse(Vec::new()).ending(End::Stall);
    let server = MockServer::always(response).await;
    let mut http = quick_http();
    http.first_byte_timeout_secs = 0.3;
    let (_, error) = tokens(&anthropic(&server.url(), http)).await;
    match error {
        Some(ProviderError::Timeout { phase, .. }) => assert_eq!(phase, "first chunk"),
        other => panic!("expected a first-byte timeout, got {other:?}"),
    }
}

#[tokio::test]
async fn http_errors_with_and_without_json_bodies_say_what_happened() {
    let cases = [
        (
            400,
            "application/json",
            r#"{"error":{"message":"messages: field required","type":"invalid_request_error"}}"#,
            "messages: field required",
        ),
        (400, "text/plain", "", "(empty body)"),
        (
            401,
            "application/json",
            r#"{"error":{"message":"Incorrect API key provided"}}"#,
            "check the API key",
        ),
        (401, "text/html", "<html>nope</html>", "<html>nope</html>"),
        (
            429,
            "application/json",
            r#"{"error":{"message":"Rate limit reached"}}"#,
            "rate limited",
        ),
        (500, "text/plain", "upstream exploded", "upstream exploded"),
        (
            500,
            "application/json",
            r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
            "Internal server error",
        ),
    ];
    for (status, content_type, body, expected) in cases {
        let server = MockServer::always(MockResponse::status(status, content_type, body)).await;
        for anthropic_kind in [false, true] {
            let (_, error) = if anthropic_kind {
                tokens(&anthropic(&server.url(), quick_http())).await
            } else {
                tokens(&openai(&server.url(), quick_http())).await
            };
            match error {
                Some(e @ ProviderError::Http { .. }) => {
                    let text = e.to_string();
                    assert!(
                        text.contains(&format!("HTTP {status}")) && text.contains(expected),
                        "{text}"
                    );
                    assert!(
                        text.contains("127.0.0.1"),
                        "the message names the URL: {text}"
                    );
                    assert_eq!(e.is_retryable(), status == 429 || status >= 500);
                }
                other => panic!("{status} {body}: expected Http, got {other:?}"),
            }
        }
    }
}

#[tokio::test]
async fn a_refused_connection_names_the_url() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let provider = openai(&format!("http://127.0.0.1:{port}"), quick_http());
    let (_, error) = tokens(&provider).await;
    match error {
        Some(e @ ProviderError::Connect { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains(&format!("127.0.0.1:{port}")) && text.contains("check base_url"),
                "{text}"
            );
        }
        other => panic!("expected Connect, got {other:?}"),
    }
}

#[test]
fn random_bytes_never_panic_the_parsers() {
    use buddy_providers::anthropic::AnthropicStreamParser;
    use buddy_providers::openai::OpenAiStreamParser;
    use buddy_providers::sse::SseDecoder;
    use std::collections::VecDeque;
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let samples: Vec<Vec<u8>> = std::fs::read_dir(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/streams"
    ))
    .unwrap()
    .map(|e| std::fs::read(e.unwrap().path()).unwrap())
    .collect();
    for round in 0..400 {
        let mut bytes = samples[round % samples.len()].clone();
        // Flip, drop and duplicate random bytes of a real stream.
        for _ in 0..8 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed as usize) % bytes.len().max(1);
            match seed % 3 {
                0 => bytes[at] = (seed >> 8) as u8,
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.insert(at, bytes[at]),
            }
        }
        let mut decoder = SseDecoder::default();
        let mut events = Vec::new();
        let _ = decoder
            .push(&bytes, &mut events)
            .and_then(|()| decoder.finish(&mut events));
        let (mut a, mut b) = (
            OpenAiStreamParser::new("t", "u"),
            AnthropicStreamParser::new("t", "u"),
        );
        let mut out = VecDeque::new();
        for event in &events {
            let _ = a.event(event, &mut out);
            let _ = b.event(event, &mut out);
        }
        let _ = a.end(&mut out);
        let _ = b.end(&mut out);
    }
}

#[tokio::test]
async fn a_200_that_is_not_an_event_stream_is_a_provider_error_quoting_it() {
    let page = "<html><body><h1>502 Bad Gateway</h1></body></html>";
    let server = MockServer::always(MockResponse::status(200, "text/html", page)).await;
    for provider in [
        Box::new(openai(&server.url(), quick_http())) as Box<dyn buddy_core::Provider>,
        Box::new(anthropic(&server.url(), quick_http())),
    ] {
        let (got, error) = tokens(provider.as_ref()).await;
        assert!(got.is_empty(), "{got:?}");
        let error = error.expect("an error");
        assert!(
            matches!(error, ProviderError::Malformed { .. }),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains("content-type `text/html`") && text.contains("502 Bad Gateway"),
            "{text}"
        );
    }
    let server = MockServer::always(MockResponse::status(200, "text/event-stream", "")).await;
    let (_, error) = tokens(&openai(&server.url(), quick_http())).await;
    let text = error.expect("an empty 200 is an error").to_string();
    assert!(text.contains("an empty body"), "{text}");
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_the_key_goes_nowhere_else() {
    // The server the redirect points at would answer properly; it must never be asked.
    let elsewhere = MockServer::always(MockResponse::status(200, "text/event-stream", "")).await;
    for anthropic_kind in [false, true] {
        let mut redirect = MockResponse::status(307, "text/plain", "moved");
        redirect.headers.push((
            "location".into(),
            format!("{}/v1/chat/completions", elsewhere.url()),
        ));
        let server = MockServer::always(redirect).await;
        let (_, error) = if anthropic_kind {
            tokens(&anthropic(&server.url(), quick_http())).await
        } else {
            tokens(&openai(&server.url(), quick_http())).await
        };
        let text = error.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            text.contains("HTTP 307")
                && text.contains("redirects to")
                && text.contains("set base_url"),
            "{text}"
        );
    }
    assert!(elsewhere.requests().is_empty(), "the redirect was followed");
}

#[tokio::test]
async fn credentials_in_a_base_url_are_not_shown_in_errors() {
    // A server that fails, and a port where nothing listens: the errors name the URL
    // (sent to API clients, logged, put in spans) without its user, password or key.
    let failing = MockServer::always(MockResponse::status(500, "text/plain", "boom")).await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let failing_host = failing.url().trim_start_matches("http://").to_owned();
    for (host, expect) in [
        (failing_host, "HTTP 500"),
        (closed.to_string(), "could not connect"),
    ] {
        for base in [
            format!("http://user:s3cr3t@{host}"),
            format!("http://{host}/v1/key/?key=s3cr3t&api-version=1"),
        ] {
            let (_, error) = tokens(&openai(&base, quick_http())).await;
            let text = error.map(|e| e.to_string()).unwrap_or_default();
            assert!(text.contains(expect), "{text}");
            assert!(!text.contains("s3cr3t"), "a credential was shown: {text}");
            assert!(text.contains(&host) && text.contains("***"), "{text}");
        }
    }
}
