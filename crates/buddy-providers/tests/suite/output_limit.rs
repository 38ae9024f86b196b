//! The output limit goes in the field each server takes: `max_completion_tokens` to
//! OpenAI (and Azure OpenAI), `max_tokens` to compatible servers, the compat switch
//! over both; a server refusing the field says which switch to set.

use buddy_core::{CompletionRequest, Message, Provider, ProviderError};
use buddy_providers::{OpenAiCompat, OpenAiOptions, OpenAiProvider, OutputLimitField};
use buddy_testkit::{MockResponse, MockServer};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::quick_http;

fn provider(url: &str, field: Option<OutputLimitField>) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiOptions {
        name: "local".into(),
        base_url: format!("{url}/v1"),
        http: quick_http(),
        stream: false,
        max_output_tokens: Some(256),
        compat: OpenAiCompat {
            output_limit_field: field,
            ..OpenAiCompat::default()
        },
        ..OpenAiOptions::default()
    })
    .unwrap()
}

/// The output-limit fields of the body `provider` sends.
async fn limit_fields(field: Option<OutputLimitField>) -> (Option<u64>, Option<u64>) {
    let server = MockServer::always(MockResponse::json(
        200,
        &json!({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}),
    ))
    .await;
    let history = [Message::user("hi")];
    provider(&server.url(), field)
        .complete(CompletionRequest::new("m", &history))
        .await
        .unwrap();
    let body = server.requests()[0].json();
    (
        body.get("max_tokens").and_then(|v| v.as_u64()),
        body.get("max_completion_tokens").and_then(|v| v.as_u64()),
    )
}

#[tokio::test]
async fn a_compatible_server_gets_max_tokens_unless_the_switch_says_otherwise() {
    assert_eq!(limit_fields(None).await, (Some(256), None));
    assert_eq!(
        limit_fields(Some(OutputLimitField::MaxCompletionTokens)).await,
        (None, Some(256))
    );
    assert_eq!(
        limit_fields(Some(OutputLimitField::MaxTokens)).await,
        (Some(256), None)
    );
}

#[tokio::test]
async fn a_400_refusing_max_tokens_names_the_switch_to_set() {
    // OpenAI's answer to `max_tokens` for o-series and gpt-5 models, as sent.
    let refusal = json!({"error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter"
    }});
    let server = MockServer::always(MockResponse::json(400, &refusal)).await;
    let history = [Message::user("hi")];
    let error = provider(&server.url(), None)
        .complete(CompletionRequest::new("o3", &history))
        .await
        .unwrap_err();
    let ProviderError::Http { status, .. } = &error else {
        panic!("expected an HTTP error, got {error}");
    };
    assert_eq!(*status, 400);
    let message = error.to_string();
    assert!(
        message.contains("Unsupported parameter: 'max_tokens'")
            && message.contains("output_limit_field = \"max_completion_tokens\"")
            && message.contains("[providers.local.compat]"),
        "{message}"
    );
    // Other 400s are left as the server worded them.
    let other =
        json!({"error": {"message": "Invalid value for 'temperature': must be at most 2."}});
    let server = MockServer::always(MockResponse::json(400, &other)).await;
    let message = provider(&server.url(), None)
        .complete(CompletionRequest::new("m", &history))
        .await
        .unwrap_err()
        .to_string();
    assert!(!message.contains("output_limit_field"), "{message}");
    // A server on the old name refusing the new one gets the reverse advice.
    let vllm = json!({"error": {"message": "Unrecognized request argument supplied: max_completion_tokens"}});
    let server = MockServer::always(MockResponse::json(400, &vllm)).await;
    let message = provider(&server.url(), Some(OutputLimitField::MaxCompletionTokens))
        .complete(CompletionRequest::new("m", &history))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("output_limit_field = \"max_tokens\""),
        "{message}"
    );
}
