//! Whole turns against a broken or hostile model server: one test per fault seen from
//! outside. Each turn ends with exactly one terminal event, the right stop reason and a
//! message naming what went wrong, having read no more than its bounds allow. Time is
//! only a test bound here (`ENDS_WITHIN`), never the thing asserted.

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{ChatEvent, GuardKind, Message, Provider, StopReason, ToolOutcome};
use buddy_engine::{Engine, LoopPolicy, TurnOutcome, TurnRequest};
use buddy_providers::{HttpSettings, OpenAiOptions, OpenAiProvider};
use buddy_testkit::{
    MockResponse, MockServer, Piece, TestTool, TestToolbox, assert_event_order,
    assert_history_valid, openai_sse,
};

use super::{endless, quick_http, text_chunk};

/// The longest any of these turns may take before the test itself gives up.
const ENDS_WITHIN: Duration = Duration::from_secs(60);

/// What the loopback socket buffers may hold beyond a bound when buddy stops reading.
pub(super) const SOCKET_SLACK: usize = 16 * 1024 * 1024;

fn provider(server: &MockServer, http: HttpSettings, stream: bool) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiOptions {
        base_url: format!("{}/v1", server.url()),
        api_key: Some("sk-test".into()),
        http,
        stream,
        ..OpenAiOptions::default()
    })
    .expect("a valid provider")
}

fn toolbox() -> TestToolbox {
    TestToolbox::new().with(
        "get_weather",
        TestTool::new(|_, _| ToolOutcome::ok("14°C and rain")),
    )
}

/// Runs one turn to its end and checks what every turn must hold.
pub(super) async fn turn(
    provider: impl Provider + 'static,
    policy: LoopPolicy,
) -> (Vec<ChatEvent>, TurnOutcome) {
    let engine = Engine::new(Arc::new(provider), Arc::new(toolbox()));
    let request = TurnRequest::new("model-x", "Umbrella in Paris today?")
        .with_history(vec![Message::system("Be brief.")])
        .with_policy(policy);
    let (events, outcome) = tokio::time::timeout(ENDS_WITHIN, engine.run_collect(request))
        .await
        .expect("the turn must end by itself");
    assert_event_order(&events);
    assert_history_valid(&outcome.messages);
    (events, outcome)
}

/// The terminal event's reason and its message (or answer).
pub(super) fn ending(events: &[ChatEvent]) -> (StopReason, String) {
    match events.last() {
        Some(ChatEvent::Error {
            reason, message, ..
        }) => (*reason, message.clone()),
        Some(ChatEvent::Done { reason, answer, .. }) => (*reason, answer.clone()),
        other => panic!("no terminal event: {other:?}"),
    }
}

fn arguments_chunk(arguments: &str) -> String {
    format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":\"{arguments}\"}}}}]}},\"finish_reason\":null}}]}}\n\n"
    )
}

const CALL_HEAD: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n";

/// Checks a turn that ended on a bound: a provider error naming it, with few bytes read,
/// after `model_calls` (one: not retried).
pub(super) fn assert_bounded(
    events: &[ChatEvent],
    server: &MockServer,
    bound_name: &str,
    bound: usize,
    model_calls: u32,
) {
    let (reason, message) = ending(events);
    assert_eq!(reason, StopReason::ProviderError, "{message}");
    assert!(
        message.contains(&format!("{bound_name} = {bound}")),
        "the message names the bound and its value: {message}"
    );
    let sent = server.body_bytes_sent();
    assert!(
        sent < bound + SOCKET_SLACK,
        "buddy read on: {sent} bytes sent for a bound of {bound}"
    );
    assert_eq!(model_calls, 1, "one model call, not retried");
}

#[tokio::test]
async fn endless_valid_text_ends_the_turn_at_max_reply_bytes() {
    let chunk = text_chunk(&"a".repeat(1000));
    let server = MockServer::always(endless("", &chunk, 60_000, Duration::ZERO)).await;
    let http = HttpSettings {
        max_reply_bytes: 256 * 1024,
        ..quick_http()
    };
    // Text this repetitive is cut sooner by the chant guard (`repetitive_output`); with
    // that guard off, the byte bound is what ends it.
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
async fn endless_repetitive_text_is_cut_by_the_chant_guard_first() {
    let chunk = text_chunk(&"a".repeat(1000));
    let server = MockServer::always(endless("", &chunk, 60_000, Duration::ZERO)).await;
    let (events, outcome) =
        turn(provider(&server, quick_http(), true), LoopPolicy::default()).await;
    let (reason, _) = ending(&events);
    assert_eq!(reason, StopReason::RepetitiveOutput);
    assert_eq!(outcome.stats.model_calls, 1);
    assert!(server.body_bytes_sent() < SOCKET_SLACK);
}

#[tokio::test]
async fn data_lines_without_a_blank_line_end_the_turn_at_max_event_bytes() {
    let line = format!("data: {}\n", "x".repeat(1000));
    let server = MockServer::always(endless("", &line, 60_000, Duration::ZERO)).await;
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
async fn endless_tool_call_arguments_end_the_turn_at_max_reply_bytes() {
    let piece = arguments_chunk(&"y".repeat(1000));
    let server = MockServer::always(endless(CALL_HEAD, &piece, 60_000, Duration::ZERO)).await;
    let http = HttpSettings {
        max_reply_bytes: 256 * 1024,
        ..quick_http()
    };
    let (events, outcome) = turn(provider(&server, http, true), LoopPolicy::default()).await;
    assert_bounded(
        &events,
        &server,
        "max_reply_bytes",
        256 * 1024,
        outcome.stats.model_calls,
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ChatEvent::ToolCallStart { .. })),
        "a call whose arguments never ended is not run"
    );
}

#[tokio::test]
async fn a_non_streamed_body_that_never_ends_ends_the_turn_at_max_body_bytes() {
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
async fn keep_alive_comments_do_not_keep_the_turn_alive_past_call_timeout_secs() {
    // A comment every 100 ms satisfies the idle timer (5 s); the call limit (1 s) holds.
    let server = MockServer::always(endless(
        &text_chunk("Hello"),
        ": keep-alive\n\n",
        6_000,
        Duration::from_millis(100),
    ))
    .await;
    let http = HttpSettings {
        call_timeout_secs: 1.0,
        ..quick_http()
    };
    let (events, outcome) = turn(provider(&server, http, true), LoopPolicy::default()).await;
    let (reason, message) = ending(&events);
    assert_eq!(reason, StopReason::ProviderError);
    assert!(message.contains("call_timeout_secs = 1"), "{message}");
    assert_eq!(outcome.stats.model_calls, 1);
    // 10 comments a second for ~1 s, not the 600 s the server would keep going.
    let comments = server.body_bytes_sent() / ": keep-alive\n\n".len();
    assert!(comments < 300, "{comments} comments were read");
}

#[tokio::test]
async fn a_deadline_covers_the_finalize_call_to_a_server_that_never_ends() {
    // The first reply asks for a tool; every later one is text kept alive by comments for
    // ten minutes. The deadline (1 s) passes during the second call; the Finalize call
    // gets its grace (500 ms) and then buddy answers from the tool result.
    let server = MockServer::start(|_, n| {
        if n == 0 {
            MockResponse::sse(openai_sse(
                "",
                &[("call_1", "get_weather", r#"{"city":"Paris"}"#)],
            ))
        } else {
            endless(
                &text_chunk("Still thinking"),
                ": keep-alive\n\n",
                6_000,
                Duration::from_millis(100),
            )
        }
    })
    .await;
    let http = HttpSettings {
        call_timeout_secs: 600.0,
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
    // Each of the two cut calls read for at most its own limit: about 1 s and 0.5 s of
    // comments (15 of them), far from the 12,000 the server had queued.
    let comments = server.body_bytes_sent() / ": keep-alive\n\n".len();
    assert!(comments < 200, "{comments} comments were read");
    assert_eq!(outcome.stats.tool_calls, 1);
}

#[tokio::test]
async fn two_thousand_calls_in_one_reply_run_only_max_calls_per_reply() {
    let calls: Vec<(String, String)> = (0..2_000)
        .map(|i| (format!("call_{i}"), format!(r#"{{"city":"town {i}"}}"#)))
        .collect();
    let borrowed: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "get_weather", args.as_str()))
        .collect();
    let first = openai_sse("", &borrowed);
    let server = MockServer::start(move |_, n| {
        if n == 0 {
            MockResponse::sse(first.clone())
        } else {
            MockResponse::sse(openai_sse("Rain everywhere.", &[]))
        }
    })
    .await;
    // The turn's own cap is raised so that the per-reply cap is what acts.
    let policy = LoopPolicy {
        max_tool_calls: 1_000,
        ..LoopPolicy::default()
    };
    let (events, outcome) = turn(provider(&server, quick_http(), true), policy).await;
    let (reason, answer) = ending(&events);
    assert_eq!(
        reason,
        StopReason::Completed,
        "not context_overflow: {answer}"
    );
    assert_eq!(outcome.stats.tool_calls, 128, "max_calls_per_reply");
    let noted = events.iter().any(|e| {
        matches!(e, ChatEvent::GuardTripped { guard, detail, .. }
            if *guard == GuardKind::ToolCallLimit && detail.contains("max_calls_per_reply"))
    });
    assert!(noted, "a guard event says the excess was dropped");
    // The model is told, in its next request, that calls were dropped.
    let second = &server.requests()[1].json();
    assert!(
        second
            .to_string()
            .contains("1872 more tool calls than the 128 one reply may have"),
        "the model reads why"
    );
}

#[tokio::test]
async fn ten_megabytes_of_arguments_end_at_max_reply_bytes_not_context_overflow() {
    // Default bounds: one reply may carry 16 MiB, so lower it to the 8 MiB a careful
    // operator might pick and send 10 MB of arguments.
    let piece = arguments_chunk(&"q".repeat(10_000));
    let server = MockServer::always(endless(CALL_HEAD, &piece, 1_000, Duration::ZERO)).await;
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
        assert!(
            message.contains("<!DOCTYPE html>"),
            "quotes the first bytes: {message}"
        );
    }
}

#[tokio::test]
async fn an_empty_200_is_a_provider_error() {
    for content_type in ["text/event-stream", "application/json"] {
        let server = MockServer::always(MockResponse::status(200, content_type, "")).await;
        let stream = content_type == "text/event-stream";
        let (events, _) = turn(
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
    }
}
