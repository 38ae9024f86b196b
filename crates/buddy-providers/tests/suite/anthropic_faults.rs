//! Whole turns against a broken or hostile Anthropic Messages server: the fault modes of
//! `faults.rs`, in Anthropic's wire format (named events, `ping` keep-alives, tool input
//! as `input_json_delta`). Each turn ends with one terminal event, the right stop reason
//! and a message naming what went wrong, having read no more than its bounds allow.

use std::time::Duration;

use buddy_core::{ChatEvent, GuardKind, ProviderError, StopReason};
use buddy_engine::LoopPolicy;
use buddy_providers::{AnthropicOptions, AnthropicProvider, HttpSettings};
use buddy_testkit::{MockResponse, MockServer, Piece, anthropic_sse};
use serde_json::json;

use super::faults::{assert_bounded, ending, turn};
use super::{endless, quick_http, tokens};

const PING: &str = "event: ping\ndata: {\"type\": \"ping\"}\n\n";

fn provider(server: &MockServer, http: HttpSettings, stream: bool) -> AnthropicProvider {
    AnthropicProvider::new(AnthropicOptions {
        name: "anthropic".into(),
        base_url: server.url(),
        api_key: Some("sk-ant-test".into()),
        headers: Default::default(),
        http,
        stream,
        max_output_tokens: None,
        cache: None,
    })
    .expect("a valid provider")
}

fn event(name: &str, data: serde_json::Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn message_start() -> String {
    event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
               "role": "assistant", "content": [], "model": "claude-x", "stop_reason": null,
               "usage": {"input_tokens": 20, "output_tokens": 1}}}),
    )
}

/// The start of a reply whose first block is text.
fn text_head() -> String {
    message_start()
        + &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        )
}

fn text_delta(text: &str) -> String {
    event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
    )
}

/// The start of a reply whose first block calls `get_weather`.
fn tool_head() -> String {
    message_start()
        + &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block":
                   {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}}),
        )
}

fn json_delta(partial: &str) -> String {
    event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": partial}}),
    )
}

#[tokio::test]
async fn endless_text_deltas_end_the_turn_at_max_reply_bytes() {
    let delta = text_delta(&"a".repeat(1000));
    let server = MockServer::always(endless(&text_head(), &delta, 60_000, Duration::ZERO)).await;
    let http = HttpSettings {
        max_reply_bytes: 256 * 1024,
        ..quick_http()
    };
    let policy = LoopPolicy {
        chant_repeats: None,
        ..LoopPolicy::default()
    };
    let (events, outcome) = turn(provider(&server, http, true), policy).await;
    assert_bounded(
        &events,
        &server,
        "max_reply_bytes",
        256 * 1024,
        outcome.stats.model_calls,
    );
}

#[tokio::test]
async fn data_lines_without_a_blank_line_end_the_turn_at_max_event_bytes() {
    let line = format!("data: {}\n", "x".repeat(1000));
    let server = MockServer::always(endless(&text_head(), &line, 60_000, Duration::ZERO)).await;
    let http = HttpSettings {
        max_event_bytes: 64 * 1024,
        ..quick_http()
    };
    let (events, outcome) = turn(provider(&server, http, true), LoopPolicy::default()).await;
    assert_bounded(
        &events,
        &server,
        "max_event_bytes",
        64 * 1024,
        outcome.stats.model_calls,
    );
}

#[tokio::test]
async fn endless_tool_input_ends_the_turn_at_max_reply_bytes_and_runs_nothing() {
    let head = tool_head() + &json_delta("{\"city\": \"");
    let server = MockServer::always(endless(
        &head,
        &json_delta(&"q".repeat(10_000)),
        1_000,
        Duration::ZERO,
    ))
    .await;
    let http = HttpSettings {
        max_reply_bytes: 8 * 1024 * 1024,
        ..quick_http()
    };
    let (events, outcome) = turn(provider(&server, http, true), LoopPolicy::default()).await;
    assert_bounded(
        &events,
        &server,
        "max_reply_bytes",
        8 * 1024 * 1024,
        outcome.stats.model_calls,
    );
    assert_eq!(
        outcome.stats.tool_calls, 0,
        "a call whose input never ended is not run"
    );
}

#[tokio::test]
async fn a_non_streamed_body_that_never_ends_ends_the_turn_at_max_body_bytes() {
    let mut response = MockResponse::status(
        200,
        "application/json",
        "{\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"",
    );
    response.pieces.push(Piece::Repeat {
        bytes: vec![b'z'; 64 * 1024],
        times: 1_000,
        pause: Duration::ZERO,
    });
    let server = MockServer::always(response).await;
    let http = HttpSettings {
        max_body_bytes: 1024 * 1024,
        ..quick_http()
    };
    let (events, outcome) = turn(provider(&server, http, false), LoopPolicy::default()).await;
    assert_bounded(
        &events,
        &server,
        "max_body_bytes",
        1024 * 1024,
        outcome.stats.model_calls,
    );
}

#[tokio::test]
async fn pings_alone_end_the_call_at_the_idle_timeout() {
    // After one token, only `ping` events every 200 ms: they keep the connection open
    // but bring nothing, so the idle timeout (1 s) ends the call, not the call limit.
    let head = text_head() + &text_delta("Hello");
    let server = MockServer::always(endless(&head, PING, 1_000, Duration::from_millis(200))).await;
    let http = HttpSettings {
        idle_timeout_secs: 1.0,
        call_timeout_secs: 600.0,
        ..quick_http()
    };
    let (_, error) = tokens(&provider(&server, http, true)).await;
    let error = error.expect("the call must end with an error");
    assert!(
        matches!(&error, ProviderError::Timeout { phase, after, .. }
            if phase == "next chunk" && *after == Duration::from_secs(1)),
        "{error:?}"
    );
    let pings = server.body_bytes_sent() / PING.len();
    assert!(pings < 50, "{pings} pings were read");
}

#[tokio::test]
async fn slow_tool_input_in_small_pieces_is_progress_not_idleness() {
    // A legitimate slow reply: the arguments arrive in small pieces, one chunk every 300 ms, with pings
    // between; with a 1 s idle timeout the call still completes, because each piece is
    // an event that brings content.
    let arguments = "{\"city\": \"Paris, Île-de-France, France\"}";
    let pieces: Vec<String> = arguments.split_inclusive(' ').map(json_delta).collect();
    let tail = event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ) + &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
    ) + &event("message_stop", json!({"type": "message_stop"}));
    let mut all = tool_head();
    for piece in &pieces {
        all.push_str(PING);
        all.push_str(piece);
    }
    all.push_str(&tail);
    let server = MockServer::always(MockResponse::sse_chunked(
        all.as_bytes(),
        all.len().div_ceil(12),
        Duration::from_millis(300),
    ))
    .await;
    let http = HttpSettings {
        idle_timeout_secs: 1.0,
        ..quick_http()
    };
    let (tokens, error) = tokens(&provider(&server, http, true)).await;
    assert!(error.is_none(), "{error:?}");
    let called = tokens.iter().any(|t| {
        matches!(t, buddy_core::Token::ToolCall(call)
            if call.name == "get_weather" && call.arguments.contains("Île-de-France"))
    });
    assert!(called, "{tokens:?}");
}

#[tokio::test]
async fn pings_do_not_keep_the_turn_alive_past_call_timeout_secs() {
    // A text delta every 100 ms among pings satisfies the idle timer; the call limit holds.
    let piece = format!("{PING}{}", text_delta("."));
    let head = text_head() + &text_delta("Hello");
    let server =
        MockServer::always(endless(&head, &piece, 6_000, Duration::from_millis(100))).await;
    let http = HttpSettings {
        call_timeout_secs: 1.0,
        ..quick_http()
    };
    let policy = LoopPolicy {
        chant_repeats: None,
        ..LoopPolicy::default()
    };
    let (events, outcome) = turn(provider(&server, http, true), policy).await;
    let (reason, message) = ending(&events);
    assert_eq!(reason, StopReason::ProviderError);
    assert!(message.contains("call_timeout_secs = 1"), "{message}");
    assert_eq!(outcome.stats.model_calls, 1);
    let pieces = server.body_bytes_sent() / piece.len();
    assert!(pieces < 300, "{pieces} pieces were read");
}

#[tokio::test]
async fn a_deadline_covers_the_finalize_call_to_a_server_that_never_ends() {
    // The first reply asks for a tool; every later one is text kept open by pings for
    // ten minutes. The deadline (1 s) passes during the second call; the Finalize call
    // gets its grace (500 ms) and then buddy answers from the tool result.
    let server = MockServer::start(|_, n| {
        if n == 0 {
            MockResponse::sse(anthropic_sse(
                "",
                &[("toolu_1", "get_weather", r#"{"city":"Paris"}"#)],
            ))
        } else {
            endless(
                &(text_head() + &text_delta("Still thinking")),
                PING,
                6_000,
                Duration::from_millis(100),
            )
        }
    })
    .await;
    let http = HttpSettings {
        call_timeout_secs: 600.0,
        idle_timeout_secs: 600.0,
        ..quick_http()
    };
    let policy = LoopPolicy {
        deadline_ms: Some(1_000),
        finalize_grace_ms: 500,
        ..LoopPolicy::default()
    };
    let (events, outcome) = turn(provider(&server, http, true), policy).await;
    let (reason, answer) = ending(&events);
    assert_eq!(reason, StopReason::Deadline, "{answer}");
    assert!(
        answer.contains("14°C and rain"),
        "the fallback answer quotes the tool result: {answer}"
    );
    assert_eq!(server.requests().len(), 3, "tool round, cut call, Finalize");
    let pings = server.body_bytes_sent() / PING.len();
    assert!(pings < 200, "{pings} pings were read");
    assert_eq!(outcome.stats.tool_calls, 1);
}

#[tokio::test]
async fn two_thousand_tool_use_blocks_in_one_reply_run_only_max_calls_per_reply() {
    let calls: Vec<(String, String)> = (0..2_000)
        .map(|i| (format!("toolu_{i}"), format!(r#"{{"city":"town {i}"}}"#)))
        .collect();
    let borrowed: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "get_weather", args.as_str()))
        .collect();
    let first = anthropic_sse("", &borrowed);
    let server = MockServer::start(move |_, n| {
        if n == 0 {
            MockResponse::sse(first.clone())
        } else {
            MockResponse::sse(anthropic_sse("Rain everywhere.", &[]))
        }
    })
    .await;
    let policy = LoopPolicy {
        max_tool_calls: 1_000,
        ..LoopPolicy::default()
    };
    let (events, outcome) = turn(provider(&server, quick_http(), true), policy).await;
    let (reason, answer) = ending(&events);
    assert_eq!(reason, StopReason::Completed, "{answer}");
    assert_eq!(outcome.stats.tool_calls, 128, "max_calls_per_reply");
    let noted = events.iter().any(|e| {
        matches!(e, ChatEvent::GuardTripped { guard, detail, .. }
            if *guard == GuardKind::ToolCallLimit && detail.contains("max_calls_per_reply"))
    });
    assert!(noted, "a guard event says the excess was dropped");
    let second = server.requests()[1].json().to_string();
    assert!(
        second.contains("1872 more tool calls than the 128 one reply may have"),
        "the model reads why"
    );
}

#[tokio::test]
async fn an_html_error_page_with_status_200_is_a_provider_error() {
    let page = "<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>";
    let server = MockServer::always(MockResponse::status(200, "text/html", page)).await;
    for stream in [true, false] {
        let (events, _) = turn(
            provider(&server, quick_http(), stream),
            LoopPolicy::default(),
        )
        .await;
        let (reason, message) = ending(&events);
        assert_eq!(reason, StopReason::ProviderError, "stream={stream}");
        assert!(message.contains("text/html"), "quotes the type: {message}");
        assert!(message.contains("<!DOCTYPE html>"), "{message}");
    }
}

#[tokio::test]
async fn an_empty_200_and_a_stream_cut_before_message_stop_are_provider_errors() {
    let cut = tool_head() + &json_delta("{\"city\": \"Par");
    for (content_type, body, stream) in [
        ("text/event-stream", String::new(), true),
        ("application/json", String::new(), false),
        ("text/event-stream", cut, true),
    ] {
        let server = MockServer::always(MockResponse::status(200, content_type, body)).await;
        let (events, outcome) = turn(
            provider(&server, quick_http(), stream),
            LoopPolicy::default(),
        )
        .await;
        let (reason, message) = ending(&events);
        assert_eq!(
            reason,
            StopReason::ProviderError,
            "{content_type}: {message}"
        );
        assert_eq!(outcome.stats.tool_calls, 0, "a cut call is not run");
    }
}

#[tokio::test]
async fn an_overloaded_error_event_is_retried_only_before_any_content() {
    // Anthropic reports overload inside a 200 stream. Before anything was streamed,
    // buddy retries (bounded by max_retries); after text went out, a retry would repeat
    // it, so the turn ends at once saying what the server said.
    let overloaded = event(
        "error",
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    let http = HttpSettings {
        max_retries: 2,
        retry_base_ms: 1,
        retry_max_ms: 5,
        ..quick_http()
    };
    for (body, requests) in [
        (message_start() + &overloaded, 3),
        (text_head() + &text_delta("Partial") + &overloaded, 1),
    ] {
        let server = MockServer::always(MockResponse::sse(body)).await;
        let (events, _) = turn(provider(&server, http.clone(), true), LoopPolicy::default()).await;
        let (reason, message) = ending(&events);
        assert_eq!(reason, StopReason::ProviderError, "{message}");
        assert!(message.contains("Overloaded"), "{message}");
        assert_eq!(server.requests().len(), requests, "{message}");
    }
}
