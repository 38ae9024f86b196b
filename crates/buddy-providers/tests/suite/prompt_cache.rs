//! The prompt cache on the wire: Anthropic's `cache_control` breakpoints (buddy's and a
//! client's), OpenAI's `prompt_cache_key` and the final-answer call that keeps its tools
//! under `tool_choice: "none"`, as a loopback server receives them; and the cache counts
//! of a reply read back into the call's usage.

use buddy_core::{
    CacheMark, CacheTtl, CompletionRequest, Message, Provider, ToolCall, ToolChoice, ToolSpec,
};
use buddy_providers::{
    AnthropicOptions, AnthropicProvider, OpenAiCompat, OpenAiOptions, OpenAiProvider,
};
use buddy_testkit::{MockResponse, MockServer};
use serde_json::{Value, json};

use super::{quick_http, weather_tool};

fn anthropic_at(url: &str, cache: Option<CacheTtl>) -> AnthropicProvider {
    AnthropicProvider::new(AnthropicOptions {
        name: "claude".into(),
        base_url: url.into(),
        api_key: Some("k".into()),
        headers: Default::default(),
        http: quick_http(),
        stream: false,
        max_output_tokens: None,
        cache,
    })
    .unwrap()
}

fn reply() -> MockResponse {
    MockResponse::json(
        200,
        &json!({"id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "ok"}],
            "usage": {"input_tokens": 40, "cache_read_input_tokens": 3000,
                      "cache_creation_input_tokens": 500,
                      "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 300},
                      "output_tokens": 2}}),
    )
}

/// A turn two rounds in: system, user, then two tool rounds.
fn history() -> Vec<Message> {
    vec![
        Message::system("You are careful."),
        Message::user("weather in Oslo and Bergen?"),
        Message::Assistant {
            content: Some("Checking Oslo.".into()),
            tool_calls: vec![ToolCall::new("t1", "get_weather", r#"{"city":"Oslo"}"#)],
        },
        Message::tool_result("t1", "rain", false),
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall::new("t2", "get_weather", r#"{"city":"Bergen"}"#)],
        },
        Message::tool_result("t2", "sun", false),
    ]
}

fn tools() -> Vec<ToolSpec> {
    let mut second = weather_tool();
    second.name = "get_time".into();
    vec![weather_tool(), second]
}

/// Every `cache_control` of a body, as (where, value).
fn marks(body: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if let Some(c) = tool.get("cache_control") {
            out.push((format!("tool {i}"), c.clone()));
        }
    }
    for block in body["system"].as_array().into_iter().flatten() {
        if let Some(c) = block.get("cache_control") {
            out.push(("system".into(), c.clone()));
        }
    }
    for (m, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (b, block) in message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(c) = block.get("cache_control") {
                out.push((format!("message {m} block {b}"), c.clone()));
            }
        }
    }
    out
}

async fn anthropic_body(
    cache: Option<CacheTtl>,
    client: &[CacheMark],
) -> (Value, buddy_core::Usage) {
    let server = MockServer::always(reply()).await;
    let provider = anthropic_at(&server.url(), cache);
    let history = history();
    let tools = tools();
    let mut request = CompletionRequest::new("claude-sonnet-4-5", &history).with_tools(&tools);
    request.cache_marks = client;
    let completion = provider.complete(request).await.unwrap();
    (server.requests()[0].json(), completion.usage.unwrap())
}

#[tokio::test]
async fn anthropic_requests_mark_tools_system_and_the_latest_block() {
    let (body, usage) = anthropic_body(Some(CacheTtl::FiveMinutes), &[]).await;
    let five = json!({"type": "ephemeral"});
    assert_eq!(
        marks(&body),
        vec![
            ("tool 1".to_owned(), five.clone()),
            ("system".to_owned(), five.clone()),
            ("message 4 block 0".to_owned(), five),
        ]
    );
    assert_eq!(body["system"][0]["text"], "You are careful.");
    // The cache counts come back into the call's usage: every kind of input.
    assert_eq!(
        (
            usage.input_tokens,
            usage.cached_input_tokens,
            usage.cache_write_tokens,
            usage.cache_write_1h_tokens
        ),
        (3540, 3000, 500, 300)
    );
    // One hour, when the provider is configured for it.
    let (body, _) = anthropic_body(Some(CacheTtl::OneHour), &[]).await;
    let hour = json!({"type": "ephemeral", "ttl": "1h"});
    assert!(marks(&body).iter().all(|(_, c)| *c == hour), "{body}");
    assert_eq!(marks(&body).len(), 3);
}

#[tokio::test]
async fn a_clients_breakpoints_are_kept_and_count_against_the_four() {
    // The client marked the first tool round (message 2: its tool_use block) and the
    // user message, both for five minutes.
    let client = [
        CacheMark {
            message: 1,
            ttl: CacheTtl::FiveMinutes,
        },
        CacheMark {
            message: 2,
            ttl: CacheTtl::FiveMinutes,
        },
    ];
    let (body, _) = anthropic_body(Some(CacheTtl::OneHour), &client).await;
    let marked: Vec<String> = marks(&body).into_iter().map(|(w, _)| w).collect();
    // Messages on the wire: user, assistant (text, tool_use), user (result), assistant
    // (tool_use), user (result). The client's two, then the system and the latest: four.
    assert_eq!(
        marked,
        vec![
            "system",
            "message 0 block 0",
            "message 1 block 1",
            "message 4 block 0"
        ]
    );
    // buddy's own after a client's five-minute one are five minutes (longer ones first).
    assert_eq!(
        body["system"][0]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
    assert_eq!(
        body["messages"][4]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    // Caching off: only the client's go, and the system prompt stays plain text.
    let (body, _) = anthropic_body(None, &client).await;
    let marked: Vec<String> = marks(&body).into_iter().map(|(w, _)| w).collect();
    assert_eq!(marked, vec!["message 0 block 0", "message 1 block 1"]);
    assert_eq!(body["system"], "You are careful.");
    let (plain, _) = anthropic_body(None, &[]).await;
    assert!(marks(&plain).is_empty(), "{plain}");
    // A mark on a message the request does not have is ignored, not an error.
    let stray = [CacheMark {
        message: 99,
        ttl: CacheTtl::FiveMinutes,
    }];
    let (body, _) = anthropic_body(None, &stray).await;
    assert!(marks(&body).is_empty());
}

fn openai_at(url: &str, compat: OpenAiCompat) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiOptions {
        base_url: format!("{url}/v1"),
        api_key: Some("sk-test".into()),
        http: quick_http(),
        stream: false,
        compat,
        ..OpenAiOptions::default()
    })
    .unwrap()
}

fn openai_reply() -> MockResponse {
    MockResponse::json(
        200,
        &json!({"id": "c1", "object": "chat.completion", "model": "gpt-5",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 2006, "completion_tokens": 3, "total_tokens": 2009,
                      "prompt_tokens_details": {"cached_tokens": 1920}}}),
    )
}

async fn openai_bodies(compat: OpenAiCompat) -> Vec<Value> {
    let server = MockServer::always(openai_reply()).await;
    let provider = openai_at(&server.url(), compat);
    let history = history();
    let tools = tools();
    for finalize in [false, true] {
        let mut request = CompletionRequest::new("gpt-5", &history).with_tools(&tools);
        request.cache_key = Some("buddy-0123");
        if finalize {
            request.tool_choice = Some(ToolChoice::None);
        }
        let completion = provider.complete(request).await.unwrap();
        assert_eq!(completion.usage.unwrap().cached_input_tokens, 1920);
    }
    server.requests().iter().map(|r| r.json()).collect()
}

#[tokio::test]
async fn openai_gets_one_cache_key_and_a_final_call_that_keeps_its_tools() {
    let bodies = openai_bodies(OpenAiCompat {
        tool_choice_none: Some(true),
        prompt_cache_key: Some(true),
        prompt_cache_retention: Some("24h".into()),
        ..OpenAiCompat::default()
    })
    .await;
    let [round, last] = &bodies[..] else {
        panic!("two requests")
    };
    for body in [round, last] {
        assert_eq!(body["prompt_cache_key"], "buddy-0123");
        assert_eq!(body["prompt_cache_retention"], "24h");
    }
    // The final call sends the same tools, not callable: the round's request is its prefix.
    assert_eq!(last["tools"], round["tools"]);
    assert_eq!(last["tool_choice"], "none");
    assert_eq!(last["messages"], round["messages"]);
    assert!(round.get("tool_choice").is_none(), "{round}");
}

#[tokio::test]
async fn a_compatible_server_gets_neither_unless_its_compat_says_so() {
    // A loopback server is not OpenAI's: unset switches are off there.
    let bodies = openai_bodies(OpenAiCompat::default()).await;
    for body in &bodies {
        assert!(body.get("prompt_cache_key").is_none(), "{body}");
        assert!(body.get("prompt_cache_retention").is_none(), "{body}");
    }
    assert!(bodies[0]["tools"].is_array());
    assert!(bodies[1].get("tools").is_none(), "{}", bodies[1]);
    assert!(bodies[1].get("tool_choice").is_none(), "{}", bodies[1]);
}

#[tokio::test]
async fn a_trimming_note_after_the_system_prompt_leaves_the_prompts_breakpoint_be() {
    let server = MockServer::always(reply()).await;
    let provider = anthropic_at(&server.url(), Some(CacheTtl::FiveMinutes));
    let mut history = history();
    history.insert(
        1,
        Message::system("[system note] 4 earlier messages were left out."),
    );
    let tools = tools();
    let request = CompletionRequest::new("claude-sonnet-4-5", &history).with_tools(&tools);
    provider.complete(request).await.unwrap();
    let body = server.requests()[0].json();
    assert_eq!(
        body["system"],
        json!([
            {"type": "text", "text": "You are careful.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "[system note] 4 earlier messages were left out."},
        ])
    );
}
