//! Every recorded stream in `tests/fixtures/streams` (see its SOURCES.md), replayed
//! from a loopback server whole and in small pieces, parses to the documented result.

use std::time::Duration;

use buddy_core::{FinishReason, ProviderError, Token, ToolCall};
use buddy_testkit::{MockResponse, MockServer};
use pretty_assertions::assert_eq;

use super::{anthropic, complete, fixture, openai, quick_http, tokens};

#[derive(Debug, PartialEq)]
struct Parsed {
    text: String,
    refusal: String,
    calls: Vec<ToolCall>,
    finish: Option<FinishReason>,
    total_tokens: Option<u64>,
}

#[derive(Clone, Copy)]
enum Kind {
    OpenAi,
    Anthropic,
}

/// Replays `name` whole and in 7-byte pieces; both must give the same result.
async fn replay(name: &str, kind: Kind) -> Parsed {
    let body = fixture(name);
    let mut results = Vec::new();
    for response in [
        MockResponse::sse(body.clone()),
        MockResponse::sse_chunked(&body, 7, Duration::ZERO),
    ] {
        let server = MockServer::always(response).await;
        let completion = match kind {
            Kind::OpenAi => complete(&openai(&server.url(), quick_http())).await,
            Kind::Anthropic => complete(&anthropic(&server.url(), quick_http())).await,
        }
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        results.push(Parsed {
            text: completion.text,
            refusal: completion.refusal,
            calls: completion.tool_calls,
            finish: completion.finish,
            total_tokens: completion.usage.map(|u| u.input_tokens + u.output_tokens),
        });
    }
    let chunked = results.pop().unwrap();
    let whole = results.pop().unwrap();
    assert_eq!(
        whole, chunked,
        "{name}: chunk boundaries changed the result"
    );
    whole
}

/// Replays an error fixture and returns the typed error.
async fn replay_error(name: &str, kind: Kind) -> (Vec<Token>, ProviderError) {
    let server = MockServer::always(MockResponse::sse(fixture(name))).await;
    let (tokens, error) = match kind {
        Kind::OpenAi => tokens(&openai(&server.url(), quick_http())).await,
        Kind::Anthropic => tokens(&anthropic(&server.url(), quick_http())).await,
    };
    (
        tokens,
        error.unwrap_or_else(|| panic!("{name} must end with an error")),
    )
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall::new(id, name, args)
}

#[tokio::test]
async fn openai_single_tool_call_with_usage() {
    let p = replay("openai_single_tool_call_usage.sse", Kind::OpenAi).await;
    assert_eq!(
        p,
        Parsed {
            text: String::new(),
            refusal: String::new(),
            calls: vec![call(
                "call_CTf1nWJLqSeRgDqaCG27xZ74",
                "get_weather",
                r#"{"city":"San Francisco","state":"CA"}"#
            )],
            finish: Some(FinishReason::ToolCalls),
            total_tokens: Some(67),
        }
    );
}

#[tokio::test]
async fn openai_parallel_tool_calls() {
    let p = replay("openai_parallel_tool_calls.sse", Kind::OpenAi).await;
    assert_eq!(
        p.calls,
        vec![
            call(
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                r#"{"city": "Edinburgh", "country": "GB", "units": "c"}"#
            ),
            call(
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                r#"{"ticker": "AAPL", "exchange": "NASDAQ"}"#
            ),
        ]
    );
    assert_eq!(
        (p.finish, p.total_tokens),
        (Some(FinishReason::ToolCalls), Some(209))
    );
}

#[tokio::test]
async fn openai_text_with_usage_and_logprobs() {
    let p = replay("openai_text_usage.sse", Kind::OpenAi).await;
    assert_eq!(
        (p.text.as_str(), p.calls.len(), p.finish, p.total_tokens),
        ("Foo!", 0, Some(FinishReason::Stop), Some(11))
    );
}

#[tokio::test]
async fn openai_refusal_is_kept_apart_from_content() {
    let p = replay("openai_refusal.sse", Kind::OpenAi).await;
    assert_eq!(p.text, "");
    assert_eq!(p.refusal, "I'm sorry, I can't assist with that request.");
    assert_eq!(
        (p.finish, p.total_tokens),
        (Some(FinishReason::Stop), Some(90))
    );
}

#[tokio::test]
async fn openai_finish_length_is_surfaced() {
    let p = replay("openai_finish_length.sse", Kind::OpenAi).await;
    assert_eq!(
        (p.text.as_str(), p.finish, p.total_tokens),
        ("{\"", Some(FinishReason::Length), Some(80))
    );
}

#[tokio::test]
async fn vllm_first_delta_has_a_name_and_no_arguments_key() {
    let p = replay("vllm_tool_call_name_only_first_delta.sse", Kind::OpenAi).await;
    assert_eq!(
        p.calls,
        vec![call(
            "chatcmpl-tool-ca99dda515524c6abe47d1ea22813507",
            "run_command",
            r#"{"command": "ls"}"#
        )]
    );
    assert_eq!(
        (p.finish, p.total_tokens),
        (Some(FinishReason::ToolCalls), None)
    );
}

#[tokio::test]
async fn ollama_whole_calls_and_no_done_marker() {
    let p = replay("ollama_parallel_tool_calls_whole.sse", Kind::OpenAi).await;
    assert_eq!(
        p.calls,
        vec![
            call("call_wteop8bt", "run_command", r#"{"command":"ls"}"#),
            call("call_rk2xye1l", "run_command", r#"{"command":"ls -l"}"#),
        ]
    );
    assert_eq!(p.finish, Some(FinishReason::ToolCalls));
}

#[tokio::test]
async fn openrouter_keepalives_and_a_repeated_finish_reason() {
    let server = MockServer::always(MockResponse::sse(fixture(
        "openrouter_keepalive_comments_text.sse",
    )))
    .await;
    let (tokens, error) = tokens(&openai(&server.url(), quick_http())).await;
    assert!(error.is_none(), "{error:?}");
    let finishes = tokens
        .iter()
        .filter(|t| matches!(t, Token::Finish { .. }))
        .count();
    assert_eq!(
        finishes, 1,
        "finish_reason arrives twice, one finish is emitted"
    );
    let p = replay("openrouter_keepalive_comments_text.sse", Kind::OpenAi).await;
    assert_eq!(
        p.text,
        "I recommend naming your Python retry library `resilix`, as it conveys resilience and is modern and brandable."
    );
    assert_eq!(
        (p.finish, p.total_tokens),
        (Some(FinishReason::Stop), Some(962))
    );
}

#[tokio::test]
async fn mistral_call_without_index_in_the_finish_chunk() {
    let p = replay("mistral_tool_call_no_index.sse", Kind::OpenAi).await;
    assert_eq!(
        p.calls,
        vec![call(
            "gSIMJiOkT",
            "weather",
            r#"{"location": "San Francisco"}"#
        )]
    );
    assert_eq!(
        (p.finish, p.total_tokens),
        (Some(FinishReason::ToolCalls), Some(146))
    );
}

#[tokio::test]
async fn groq_error_event_after_http_200_is_a_typed_error() {
    let (tokens, error) = replay_error("groq_midstream_error_event.sse", Kind::OpenAi).await;
    let reasoning = tokens
        .iter()
        .filter(|t| matches!(t, Token::Reasoning { .. }))
        .count();
    // 94 chunks precede the error: one carrying only the role, then 93 reasoning deltas.
    assert_eq!(
        reasoning, 93,
        "every reasoning delta before the error still arrives"
    );
    assert!(
        !tokens
            .iter()
            .any(|t| matches!(t, Token::Text { .. } | Token::Finish { .. }))
    );
    match &error {
        ProviderError::Stream {
            message,
            retryable,
            url,
            ..
        } => {
            assert!(
                message.starts_with("Tool call validation failed"),
                "{message}"
            );
            assert!(!retryable);
            assert!(url.ends_with("/v1/chat/completions"));
        }
        other => panic!("expected a stream error, got {other:?}"),
    }
}

#[tokio::test]
async fn anthropic_text_then_tool_use_with_a_ping_and_no_trailing_blank_line() {
    let p = replay("anthropic_text_then_tool_use.sse", Kind::Anthropic).await;
    assert_eq!(p.text, "I'll check the current weather in Paris for you.");
    assert_eq!(
        p.calls,
        vec![call(
            "toolu_01NRLabsLyVHZPKxbKvkfSMn",
            "get_weather",
            r#"{"location": "Paris"}"#
        )]
    );
    assert_eq!(p.finish, Some(FinishReason::ToolCalls));
    let server = MockServer::always(MockResponse::sse(fixture(
        "anthropic_text_then_tool_use.sse",
    )))
    .await;
    let completion = complete(&anthropic(&server.url(), quick_http()))
        .await
        .unwrap();
    assert_eq!(completion.usage.map(|u| u.output_tokens), Some(65));
}

#[tokio::test]
async fn anthropic_max_tokens_leaves_no_executable_half_call() {
    let p = replay(
        "anthropic_tool_use_max_tokens_truncated.sse",
        Kind::Anthropic,
    )
    .await;
    assert!(
        p.text.starts_with("I'll create a comprehensive tax guide"),
        "{}",
        p.text
    );
    assert!(
        p.text.ends_with("Let me do that for you now."),
        "{}",
        p.text
    );
    assert_eq!(
        p.calls,
        vec![],
        "the cut-off make_file call is not executable"
    );
    assert_eq!(p.finish, Some(FinishReason::Length));
}

#[tokio::test]
async fn anthropic_tool_use_with_only_an_empty_fragment_means_empty_input() {
    let p = replay("anthropic_tool_use_no_args.sse", Kind::Anthropic).await;
    assert_eq!(p.text, "I'll update the issue list for you.");
    assert_eq!(
        p.calls,
        vec![call(
            "toolu_01QE1WLsSVp5hy5Q3GmGTmjP",
            "updateIssueList",
            "{}"
        )]
    );
    assert_eq!(p.finish, Some(FinishReason::ToolCalls));
}

#[tokio::test]
async fn anthropic_thinking_is_kept_but_not_the_answer() {
    let server = MockServer::always(MockResponse::sse(fixture(
        "anthropic_thinking_then_text.sse",
    )))
    .await;
    let completion = complete(&anthropic(&server.url(), quick_http()))
        .await
        .unwrap();
    assert_eq!(completion.reasoning.chars().count(), 202);
    assert!(
        completion
            .reasoning
            .starts_with("This is a straightforward question about pedestrian safety")
    );
    assert_eq!(completion.text.chars().count(), 1021);
    assert!(
        completion
            .text
            .starts_with("Here are the basic steps for safely crossing the street:")
    );
    assert!(
        completion
            .text
            .ends_with("Always prioritize safety over speed when crossing streets.")
    );
    assert_eq!(completion.finish, Some(FinishReason::Stop));
    let p = replay("anthropic_thinking_then_text.sse", Kind::Anthropic).await;
    assert_eq!(p.text, completion.text);
}

#[tokio::test]
async fn anthropic_overloaded_error_after_http_200_is_typed_and_retryable() {
    let (tokens, error) = replay_error("anthropic_overloaded_error.sse", Kind::Anthropic).await;
    assert!(tokens.is_empty());
    match &error {
        ProviderError::Stream {
            message, retryable, ..
        } => {
            assert_eq!(message, "Overloaded (overloaded_error)");
            assert!(retryable);
        }
        other => panic!("expected a stream error, got {other:?}"),
    }
    assert!(error.is_retryable());
}

#[test]
fn the_fixtures_are_the_shared_recordings_byte_for_byte() {
    let shared = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures/streams"
    ));
    if !shared.is_dir() {
        return; // A clone without shared/ beside it: the copies are all there is.
    }
    for entry in std::fs::read_dir(shared).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            fixture(&name),
            "{name} differs from shared/"
        );
    }
}

#[tokio::test]
async fn anthropic_usage_revised_in_message_delta_is_the_one_counted() {
    // A server-tool stream: message_start says 702 input tokens, message_delta 1,591.
    let body = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":702,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Sunny.\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"input_tokens\":1591,\"output_tokens\":42}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let server = buddy_testkit::MockServer::always(buddy_testkit::MockResponse::sse(body)).await;
    let (got, error) = super::tokens(&super::anthropic(&server.url(), super::quick_http())).await;
    assert!(error.is_none(), "{error:?}");
    let usage = got
        .iter()
        .find_map(|t| match t {
            buddy_core::Token::Finish { usage, .. } => *usage,
            _ => None,
        })
        .expect("usage");
    assert_eq!((usage.input_tokens, usage.output_tokens), (1591, 42));
}

/// The id and model of the reply, as each recorded stream states them (first chunk,
/// `message_start`), whole and in 7-byte pieces: traces' `gen_ai.response.*`.
#[tokio::test]
async fn the_replys_id_and_model_come_from_the_stream() {
    for (name, kind, id, model) in [
        (
            "openai_text_usage.sse",
            Kind::OpenAi,
            "chatcmpl-ABfw5EzoqmfXjnnsXY7Yd8OC6tb3c",
            "gpt-4o-2024-08-06",
        ),
        (
            "anthropic_text_then_tool_use.sse",
            Kind::Anthropic,
            "msg_019Q1hrJbZG26Fb9BQhrkHEr",
            "claude-sonnet-4-20250514",
        ),
    ] {
        let body = fixture(name);
        for response in [
            MockResponse::sse(body.clone()),
            MockResponse::sse_chunked(&body, 7, Duration::ZERO),
        ] {
            let server = MockServer::always(response).await;
            let (tokens, error) = match kind {
                Kind::OpenAi => tokens(&openai(&server.url(), quick_http())).await,
                Kind::Anthropic => tokens(&anthropic(&server.url(), quick_http())).await,
            };
            assert!(error.is_none(), "{name}: {error:?}");
            let told: Vec<&Token> = tokens
                .iter()
                .filter(|t| matches!(t, Token::Response(_)))
                .collect();
            assert_eq!(
                told,
                vec![&Token::Response(buddy_core::ResponseInfo {
                    id: Some(id.into()),
                    model: Some(model.into()),
                })],
                "{name}: once, with both"
            );
            assert!(
                matches!(tokens.first(), Some(Token::Response(_))),
                "{name}: before the reply"
            );
        }
    }
}
