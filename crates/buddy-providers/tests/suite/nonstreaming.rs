//! Non-streaming mode (`stream = false`) emits the same tokens; compat switches change
//! exactly the fields they name.

use buddy_core::{CompletionRequest, FinishReason, Message, Provider, ToolCall, ToolChoice};
use buddy_providers::{
    AnthropicOptions, AnthropicProvider, OpenAiCompat, OpenAiOptions, OpenAiProvider,
};
use buddy_testkit::{MockResponse, MockServer};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{quick_http, weather_tool};

fn openai_with(url: &str, stream: bool, compat: OpenAiCompat) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiOptions {
        name: "local".into(),
        base_url: format!("{url}/v1/"),
        api_key: None,
        headers: [("x-team".to_owned(), "buddy".to_owned())].into(),
        http: quick_http(),
        stream,
        max_output_tokens: Some(256),
        compat,
    })
    .unwrap()
}

fn history() -> Vec<Message> {
    vec![
        Message::user("weather?"),
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall::new(
                "call_1",
                "get_weather",
                r#"{"city":"Paris"}"#,
            )],
        },
        Message::tool_result("call_1", "rain", true),
    ]
}

#[tokio::test]
async fn openai_non_streaming_gives_the_same_tokens() {
    let server = MockServer::always(MockResponse::json(
        200,
        &json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": "Let me check.", "tool_calls": [
                {"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 8}}),
    ))
    .await;
    let provider = openai_with(&server.url(), false, OpenAiCompat::default());
    let history = history();
    let tools = [weather_tool()];
    let completion = provider
        .complete(CompletionRequest::new("m", &history).with_tools(&tools))
        .await
        .unwrap();
    assert_eq!(completion.text, "Let me check.");
    assert_eq!(
        completion.tool_calls,
        vec![ToolCall::new("call_9", "get_weather", r#"{"city":"Oslo"}"#)]
    );
    assert_eq!(completion.finish, Some(FinishReason::ToolCalls));
    assert_eq!(
        completion.usage.map(|u| (u.input_tokens, u.output_tokens)),
        Some((12, 8))
    );
    let body = server.requests()[0].json();
    assert_eq!(body["stream"], false);
    assert!(body.get("stream_options").is_none());
    assert_eq!(body["max_tokens"], 256);
    assert_eq!(server.requests()[0].header("x-team"), Some("buddy"));
    assert_eq!(
        server.requests()[0].header("authorization"),
        None,
        "no key, no header"
    );
    assert_eq!(server.requests()[0].path, "/v1/chat/completions");
}

#[tokio::test]
async fn openai_compat_switches_change_only_what_they_name() {
    let reply = MockResponse::json(
        200,
        &json!({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}),
    );
    let history = history();
    let tools = [weather_tool()];
    for (compat, content, tool_choice, has_stream_options) in [
        (OpenAiCompat::default(), json!(null), None, true),
        (
            OpenAiCompat {
                assistant_content_empty_string: true,
                no_stream_options: true,
                tool_choice_auto: true,
                ..OpenAiCompat::default()
            },
            json!(""),
            Some("auto"),
            false,
        ),
    ] {
        let server = MockServer::always(reply.clone()).await;
        let provider = openai_with(&server.url(), true, compat);
        let _ = provider
            .complete(CompletionRequest::new("m", &history).with_tools(&tools))
            .await;
        let body = server.requests()[0].json();
        assert_eq!(body["messages"][1]["content"], content);
        assert_eq!(body["tool_choice"].as_str(), tool_choice);
        assert_eq!(body.get("stream_options").is_some(), has_stream_options);
        assert_eq!(
            body["messages"][2],
            json!({"role": "tool", "tool_call_id": "call_1", "content": "rain"})
        );
    }
}

#[tokio::test]
async fn openai_request_without_tools_is_a_plain_chat() {
    let server = MockServer::always(MockResponse::json(
        200,
        &json!({"choices": [{"message": {"content": "hi"}}]}),
    ))
    .await;
    let provider = openai_with(&server.url(), false, OpenAiCompat::default());
    let history = [Message::system("be nice"), Message::user("hello")];
    let completion = provider
        .complete(CompletionRequest::new("m", &history))
        .await
        .unwrap();
    assert_eq!(
        (completion.text.as_str(), completion.finish),
        ("hi", Some(FinishReason::Stop))
    );
    let body = server.requests()[0].json();
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    assert_eq!(
        body["messages"],
        json!([{"role": "system", "content": "be nice"}, {"role": "user", "content": "hello"}])
    );
}

#[tokio::test]
async fn anthropic_non_streaming_and_its_request_shape() {
    let server = MockServer::always(MockResponse::json(
        200,
        &json!({"id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "tool_use",
            "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                        {"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}],
            "usage": {"input_tokens": 30, "output_tokens": 9}}),
    ))
    .await;
    let provider = AnthropicProvider::new(AnthropicOptions {
        name: "claude".into(),
        base_url: format!("{}/v1", server.url()),
        api_key: Some("k".into()),
        headers: Default::default(),
        http: quick_http(),
        stream: false,
        max_output_tokens: Some(1000),
        cache: None,
    })
    .unwrap();
    let history = history();
    let tools = [weather_tool()];
    let mut request = CompletionRequest::new("claude-x", &history).with_tools(&tools);
    request.tool_choice = Some(ToolChoice::Required);
    let completion = provider.complete(request).await.unwrap();
    assert_eq!(
        (completion.text.as_str(), completion.reasoning.as_str()),
        ("Checking.", "hmm")
    );
    assert_eq!(
        completion.tool_calls,
        vec![ToolCall::new(
            "toolu_1",
            "get_weather",
            r#"{"city":"Oslo"}"#
        )]
    );
    assert_eq!(completion.finish, Some(FinishReason::ToolCalls));
    let sent = &server.requests()[0];
    assert_eq!(
        sent.path, "/v1/messages",
        "a base_url ending in /v1 is accepted"
    );
    let body = sent.json();
    assert_eq!(
        (body["stream"].clone(), body["max_tokens"].clone()),
        (json!(false), json!(1000))
    );
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "rain", "is_error": true}]})
    );
}

#[tokio::test]
async fn a_200_with_an_error_body_in_non_streaming_mode_is_an_error() {
    let server = MockServer::always(MockResponse::json(
        200,
        &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ))
    .await;
    let provider = AnthropicProvider::new(AnthropicOptions {
        name: "claude".into(),
        base_url: server.url(),
        api_key: None,
        headers: Default::default(),
        http: quick_http(),
        stream: false,
        max_output_tokens: None,
        cache: None,
    })
    .unwrap();
    let history = [Message::user("hi")];
    let error = provider
        .complete(CompletionRequest::new("m", &history))
        .await
        .unwrap_err();
    assert!(
        error.is_retryable() && error.to_string().contains("Overloaded"),
        "{error}"
    );
}

/// A whole response's `id` and `model` come with the reply, as a stream's do.
#[tokio::test]
async fn a_whole_responses_id_and_model_are_kept() {
    let history = [Message::user("hi")];
    let server = MockServer::always(MockResponse::json(
        200,
        &json!({"id": "chatcmpl-9", "model": "gpt-4o-mini-2024-07-18",
                "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}),
    ))
    .await;
    let completion = openai_with(&server.url(), false, OpenAiCompat::default())
        .complete(CompletionRequest::new("gpt-4o-mini", &history))
        .await
        .unwrap();
    assert_eq!(
        completion.response,
        Some(buddy_core::ResponseInfo {
            id: Some("chatcmpl-9".into()),
            model: Some("gpt-4o-mini-2024-07-18".into()),
        })
    );
    let server = MockServer::always(MockResponse::json(
        200,
        &json!({"id": "msg_01", "type": "message", "model": "claude-sonnet-4-5-20250929",
                "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}),
    ))
    .await;
    let anthropic = AnthropicProvider::new(AnthropicOptions {
        name: "claude".into(),
        base_url: server.url(),
        api_key: None,
        headers: Default::default(),
        http: quick_http(),
        stream: false,
        max_output_tokens: None,
        cache: None,
    })
    .unwrap();
    let completion = anthropic
        .complete(CompletionRequest::new("claude-sonnet-4-5", &history))
        .await
        .unwrap();
    assert_eq!(
        completion.response.and_then(|r| r.id).as_deref(),
        Some("msg_01")
    );
}

/// Traces name the provider as the conventions do and the server it calls.
#[test]
fn providers_say_who_serves_them() {
    let local = openai_with("http://127.0.0.1:8080", true, OpenAiCompat::default());
    let served = local.served_by().unwrap();
    assert_eq!(
        (served.provider_name, served.base_url),
        ("openai", "http://127.0.0.1:8080/v1/")
    );
    let groq = OpenAiProvider::new(OpenAiOptions {
        name: "fast".into(),
        base_url: "https://api.groq.com/openai/v1".into(),
        ..OpenAiOptions::default()
    })
    .unwrap();
    assert_eq!(groq.served_by().map(|s| s.provider_name), Some("groq"));
}
