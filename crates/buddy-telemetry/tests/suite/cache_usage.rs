//! The prompt cache's share of the input, on the `chat` span of a call and on the turn's
//! span: `gen_ai.usage.cache_read.input_tokens` and `gen_ai.usage.cache_creation.input_tokens`.

use buddy_core::{
    ChatEvent, CompletionRequest, Message, ModelCallEnd, StopReason, TurnStats, Usage,
};
use buddy_telemetry::{Telemetry, TelemetryConfig, TurnScope};
use buddy_testkit::{MockResponse, MockServer};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

fn received(server: &MockServer) -> Vec<Span> {
    server
        .requests()
        .iter()
        .filter_map(|r| ExportTraceServiceRequest::decode(r.body.as_slice()).ok())
        .flat_map(|e| e.resource_spans)
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect()
}

fn int(span: &Span, key: &str) -> Option<i64> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value)
        .and_then(|v| match v {
            Any::IntValue(n) => Some(n),
            _ => None,
        })
}

/// Two calls, the first writing the cache and the second reading it, then the turn's end.
async fn spans(calls: [Usage; 2], stats: TurnStats) -> Vec<Span> {
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
            provider: "claude",
            model: "claude-sonnet-4-5",
            ..TurnScope::default()
        },
        None,
    );
    let history = [Message::user("hi")];
    for usage in calls {
        observer.model_call_started(&CompletionRequest::new("claude-sonnet-4-5", &history));
        observer.model_call_ended(&ModelCallEnd {
            text: "ok",
            usage: Some(usage),
            ..ModelCallEnd::default()
        });
    }
    observer.event(&ChatEvent::Done {
        reason: StopReason::Completed,
        answer: "ok".into(),
        stats,
    });
    drop(observer);
    telemetry.flush().await;
    received(&receiver)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_reads_and_writes_are_on_each_call_and_on_the_turn() {
    let write = Usage {
        input_tokens: 5_000,
        output_tokens: 10,
        cache_write_tokens: 4_900,
        ..Usage::default()
    };
    let read = Usage {
        input_tokens: 5_600,
        output_tokens: 10,
        cached_input_tokens: 4_900,
        cache_write_tokens: 600,
        cache_write_1h_tokens: 100,
    };
    let stats = TurnStats {
        model_calls: 2,
        input_tokens: 10_600,
        output_tokens: 20,
        cache_read_tokens: 4_900,
        cache_write_tokens: 5_500,
        ..TurnStats::default()
    };
    let spans = spans([write, read], stats).await;
    let chats: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert_eq!(chats.len(), 2);
    let (first, second) = if int(chats[0], "gen_ai.usage.cache_read.input_tokens").is_none() {
        (chats[0], chats[1])
    } else {
        (chats[1], chats[0])
    };
    assert_eq!(int(first, "gen_ai.usage.cache_read.input_tokens"), None);
    assert_eq!(
        int(first, "gen_ai.usage.cache_creation.input_tokens"),
        Some(4_900)
    );
    assert_eq!(
        int(second, "gen_ai.usage.cache_read.input_tokens"),
        Some(4_900)
    );
    assert_eq!(
        int(second, "gen_ai.usage.cache_creation.input_tokens"),
        Some(600)
    );
    let turn = spans
        .iter()
        .find(|s| s.name == "invoke_agent buddy")
        .expect("a turn span");
    assert_eq!(
        int(turn, "gen_ai.usage.cache_read.input_tokens"),
        Some(4_900)
    );
    assert_eq!(
        int(turn, "gen_ai.usage.cache_creation.input_tokens"),
        Some(5_500)
    );
    assert_eq!(int(turn, "gen_ai.usage.input_tokens"), Some(10_600));
}
