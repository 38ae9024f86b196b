//! buddy-providers integration tests: real recorded streams and malformed ones,
//! replayed over HTTP from a loopback server, and full engine turns per provider.

mod anthropic_faults;
mod bounds;
mod conformance;
mod engine_turns;
mod faults;
mod malformed;
mod nonstreaming;
mod output_limit;
mod prompt_cache;
mod resilience;

use std::path::PathBuf;
use std::time::Duration;

use buddy_core::{
    Completion, CompletionRequest, Message, Provider, ProviderError, Token, ToolSpec,
};
use buddy_providers::{
    AnthropicOptions, AnthropicProvider, HttpSettings, OpenAiOptions, OpenAiProvider,
};
use buddy_testkit::{MockResponse, Piece};
use futures::StreamExt;

/// The recorded streams, copied byte for byte from `shared/fixtures/streams`.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/streams"
    ))
    .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Fast timeouts and no retries unless a test asks for them.
pub fn quick_http() -> HttpSettings {
    HttpSettings {
        connect_timeout_secs: 2.0,
        first_byte_timeout_secs: 5.0,
        idle_timeout_secs: 5.0,
        max_retries: 0,
        retry_base_ms: 10,
        retry_max_ms: 2_000,
        http2_prior_knowledge: false,
        ..HttpSettings::default()
    }
}

pub fn openai(base_url: &str, http: HttpSettings) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiOptions {
        base_url: format!("{base_url}/v1"),
        api_key: Some("sk-test".into()),
        http,
        ..OpenAiOptions::default()
    })
    .unwrap()
}

pub fn anthropic(base_url: &str, http: HttpSettings) -> AnthropicProvider {
    AnthropicProvider::new(AnthropicOptions {
        name: "anthropic".into(),
        base_url: base_url.into(),
        api_key: Some("sk-ant-test".into()),
        headers: Default::default(),
        http,
        stream: true,
        max_output_tokens: None,
        cache: None,
    })
    .unwrap()
}

pub fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        parameters: serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    }
}

/// Every token of one call, or the error that ended it (with the tokens before it).
pub async fn tokens(provider: &dyn Provider) -> (Vec<Token>, Option<ProviderError>) {
    let history = [Message::user("hi")];
    let tools = [weather_tool()];
    let request = CompletionRequest::new("m", &history).with_tools(&tools);
    let call = async {
        let mut stream = match provider.stream(request).await {
            Ok(stream) => stream,
            Err(e) => return (Vec::new(), Some(e)),
        };
        let mut out = Vec::new();
        while let Some(token) = stream.next().await {
            match token {
                Ok(token) => out.push(token),
                Err(e) => return (out, Some(e)),
            }
        }
        (out, None)
    };
    tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("a provider call must end")
}

/// The collected reply of one call.
pub async fn complete(provider: &dyn Provider) -> Result<Completion, ProviderError> {
    let history = [Message::user("hi")];
    let tools = [weather_tool()];
    tokio::time::timeout(
        Duration::from_secs(20),
        provider.complete(CompletionRequest::new("m", &history).with_tools(&tools)),
    )
    .await
    .expect("a provider call must end")
}

/// A streamed response of `head` then `piece` repeated `times` times, `pause` apart.
pub fn endless(head: &str, piece: &str, times: usize, pause: Duration) -> MockResponse {
    let mut response = MockResponse::sse(head.as_bytes().to_vec());
    response.pieces.push(Piece::Repeat {
        bytes: piece.as_bytes().to_vec(),
        times,
        pause,
    });
    response
}

/// One OpenAI stream chunk carrying `text`.
pub fn text_chunk(text: &str) -> String {
    format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":null}}]}}\n\n"
    )
}
