//! A model call's `chat` span carries what the GenAI conventions (1.41.0) ask of a client
//! span: the provider as they name it, the server called, the sampling sent and the
//! server's id and model of the reply.

use buddy_core::{CompletionRequest, Message, ModelCallEnd, ResponseInfo, Sampling, ServedBy};
use buddy_telemetry::{Telemetry, TelemetryConfig, TurnScope};
use buddy_testkit::{MockResponse, MockServer};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

/// Every span the receiver got.
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

fn attr(span: &Span, key: &str) -> Option<Any> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value)
}

fn text(span: &Span, key: &str) -> Option<String> {
    match attr(span, key) {
        Some(Any::StringValue(s)) => Some(s),
        _ => None,
    }
}

/// Runs one model call through an observer made by `start` and returns the spans.
async fn one_call(served: Option<ServedBy<'_>>, sampling: &Sampling) -> Vec<Span> {
    one_call_ending(
        served,
        sampling,
        ModelCallEnd {
            text: "hello",
            ..ModelCallEnd::default()
        },
    )
    .await
}

/// [`one_call`], the call ending with `end`.
async fn one_call_ending(
    served: Option<ServedBy<'_>>,
    sampling: &Sampling,
    end: ModelCallEnd<'_>,
) -> Vec<Span> {
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
        served,
    );
    let history = [Message::user("hi")];
    let mut request = CompletionRequest::new("gpt-5", &history);
    request.sampling = Some(sampling);
    observer.model_call_started(&request);
    observer.model_call_response(&ResponseInfo {
        id: Some("chatcmpl-Bx1".into()),
        model: Some("gpt-5-2025-08-07".into()),
    });
    observer.model_call_ended(&end);
    drop(observer);
    telemetry.flush().await;
    received(&receiver)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_span_names_provider_server_sampling_and_the_reply() {
    let sampling = Sampling {
        temperature: Some(0.25),
        top_p: Some(0.5),
        seed: Some(7),
        ..Sampling::default()
    };
    let spans = one_call(
        Some(ServedBy {
            provider_name: "azure.ai.openai",
            base_url: "https://res.openai.azure.com/openai/v1",
        }),
        &sampling,
    )
    .await;
    let chat = spans
        .iter()
        .find(|s| s.name == "chat gpt-5")
        .expect("a chat span");
    let turn = spans
        .iter()
        .find(|s| s.name == "invoke_agent buddy")
        .expect("a turn span");
    for span in [chat, turn] {
        assert_eq!(
            text(span, "gen_ai.provider.name").as_deref(),
            Some("azure.ai.openai"),
            "not the buddy.toml table name"
        );
    }
    assert_eq!(
        text(chat, "server.address").as_deref(),
        Some("res.openai.azure.com")
    );
    assert_eq!(attr(chat, "server.port"), Some(Any::IntValue(443)));
    assert_eq!(
        attr(chat, "gen_ai.request.temperature"),
        Some(Any::DoubleValue(0.25))
    );
    assert_eq!(
        attr(chat, "gen_ai.request.top_p"),
        Some(Any::DoubleValue(0.5))
    );
    assert_eq!(attr(chat, "gen_ai.request.seed"), Some(Any::IntValue(7)));
    assert_eq!(
        text(chat, "gen_ai.response.id").as_deref(),
        Some("chatcmpl-Bx1")
    );
    assert_eq!(
        text(chat, "gen_ai.response.model").as_deref(),
        Some("gpt-5-2025-08-07")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_server_is_named_by_host_and_port_and_unset_sampling_is_left_out() {
    let spans = one_call(
        Some(ServedBy {
            provider_name: "openai",
            base_url: "http://127.0.0.1:8080/v1",
        }),
        &Sampling::default(),
    )
    .await;
    let chat = spans
        .iter()
        .find(|s| s.name == "chat gpt-5")
        .expect("a chat span");
    assert_eq!(text(chat, "server.address").as_deref(), Some("127.0.0.1"));
    assert_eq!(attr(chat, "server.port"), Some(Any::IntValue(8080)));
    assert_eq!(attr(chat, "gen_ai.request.temperature"), None);
    // Without who serves it, the configured name stands in, as before.
    let spans = one_call(None, &Sampling::default()).await;
    let chat = spans.iter().find(|s| s.name == "chat gpt-5").unwrap();
    assert_eq!(text(chat, "gen_ai.provider.name").as_deref(), Some("work"));
    assert_eq!(attr(chat, "server.address"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_url_with_credentials_is_exported_without_them() {
    let base_url = "https://user:s3cr3t@gw.example.com/v1?key=s3cr3t";
    let spans = one_call_ending(
        Some(ServedBy {
            provider_name: "openai",
            base_url,
        }),
        &Sampling::default(),
        ModelCallEnd {
            error: Some("connect"),
            message: Some(format!(
                "work: could not connect to {base_url}/chat/completions: connection refused"
            )),
            ..ModelCallEnd::default()
        },
    )
    .await;
    let chat = spans
        .iter()
        .find(|s| s.name == "chat gpt-5")
        .expect("a chat span");
    assert_eq!(
        text(chat, "server.address").as_deref(),
        Some("gw.example.com")
    );
    let status = chat
        .status
        .as_ref()
        .map(|s| s.message.clone())
        .unwrap_or_default();
    assert!(
        status.contains("could not connect to https://***@gw.example.com/v1"),
        "{status}"
    );
    let exported = format!("{spans:?}");
    assert!(
        !exported.contains("s3cr3t"),
        "a credential was exported: {exported}"
    );
}
