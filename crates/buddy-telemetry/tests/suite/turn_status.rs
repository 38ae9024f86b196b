//! The turn's `invoke_agent` span says how the turn ended: status ERROR when it ended
//! without an answer of the model's (as the book's traces page says), UNSET when the
//! model answered or the turn paused.

use buddy_core::{ChatEvent, StopReason, TurnStats};
use buddy_telemetry::{Telemetry, TelemetryConfig, TurnScope};
use buddy_testkit::{MockResponse, MockServer};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use prost::Message as _;

/// The turn span exported for a turn that ends with `last`.
async fn turn_span(last: ChatEvent) -> Span {
    let receiver = MockServer::always(MockResponse::status(
        200,
        "application/x-protobuf",
        Vec::new(),
    ))
    .await;
    let telemetry = Telemetry::start(&TelemetryConfig {
        endpoint: Some(format!("{}/v1/traces", receiver.url())),
        ..TelemetryConfig::default()
    })
    .unwrap();
    let observer = telemetry.turn_served(
        TurnScope {
            provider: "work",
            model: "gpt-5",
            ..TurnScope::default()
        },
        None,
    );
    observer.event(&last);
    drop(observer);
    telemetry.flush().await;
    let spans: Vec<Span> = receiver
        .requests()
        .iter()
        .filter_map(|r| ExportTraceServiceRequest::decode(r.body.as_slice()).ok())
        .flat_map(|e| e.resource_spans)
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect();
    spans
        .into_iter()
        .find(|s| s.name.starts_with("invoke_agent"))
        .expect("the turn's span")
}

fn done(reason: StopReason, answer: &str) -> ChatEvent {
    ChatEvent::Done {
        reason,
        answer: answer.into(),
        stats: TurnStats::default(),
    }
}

/// (status code, message) of a span.
fn status(span: &Span) -> (i32, String) {
    let status = span.status.clone().unwrap_or_default();
    (status.code, status.message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_without_the_models_answer_is_an_error_span_and_an_answered_one_is_not() {
    let (code, message) =
        status(&turn_span(done(StopReason::NoAnswer, "From the tool results: 3.")).await);
    assert_eq!(code, StatusCode::Error as i32);
    assert!(message.contains("no answer"), "{message}");

    let (code, message) = status(&turn_span(done(StopReason::LoopDetected, "")).await);
    assert_eq!(code, StatusCode::Error as i32);
    assert!(message.contains("without an answer"), "{message}");

    // The model answered, even at a limit: not an error status (error.type says the stop).
    for (reason, answer) in [
        (StopReason::Completed, "It is noon."),
        (StopReason::MaxModelCalls, "Done so far: 3 files."),
        // A pause waits for a person; it is no end without an answer.
        (StopReason::ApprovalRequired, ""),
    ] {
        let (code, _) = status(&turn_span(done(reason, answer)).await);
        assert_eq!(code, StatusCode::Unset as i32, "{reason}");
    }

    let error = ChatEvent::Error {
        reason: StopReason::ProviderError,
        message: "HTTP 500 from the model server".into(),
        stats: TurnStats::default(),
    };
    let (code, message) = status(&turn_span(error).await);
    assert_eq!(code, StatusCode::Error as i32);
    assert_eq!(message, "HTTP 500 from the model server");
}
