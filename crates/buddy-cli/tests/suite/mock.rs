//! `buddy mock-server` from a client's side: HTTP/2 without TLS carries many
//! concurrent calls on one connection, every request is logged.

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{CompletionRequest, Message, Provider};
use buddy_providers::{HttpSettings, OpenAiOptions, OpenAiProvider};
use buddy_scripted::Scenario;
use buddy_scripted::mock_server::{MemoryLog, MockServer};

#[tokio::test(flavor = "multi_thread")]
async fn hundreds_of_concurrent_calls_share_one_http2_connection() {
    buddy_providers::install_crypto_provider();
    let scenario = Scenario::load(&super::scenarios_dir().join("plain_chat.json")).unwrap();
    let log = MemoryLog::default();
    let mock = MockServer::new(
        vec![scenario],
        Duration::from_millis(200),
        Some(Box::new(log.clone())),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let base_url = base.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(mock.serve(listener, async move {
        let _ = stopped.await;
    }));
    let provider = Arc::new(
        OpenAiProvider::new(OpenAiOptions {
            name: "mock".into(),
            base_url: base,
            http: HttpSettings {
                http2_prior_knowledge: true,
                ..HttpSettings::default()
            },
            ..OpenAiOptions::default()
        })
        .unwrap(),
    );
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..300 {
        let provider = Arc::clone(&provider);
        calls.spawn(async move {
            let history = [Message::user("Say hello.")];
            provider
                .complete(CompletionRequest::new("scripted:plain_chat", &history))
                .await
        });
    }
    let mut answered = 0;
    while let Some(result) = calls.join_next().await {
        assert_eq!(
            result.unwrap().unwrap().text,
            "Hello! I'm buddy's scripted model."
        );
        answered += 1;
    }
    assert_eq!(answered, 300);
    // The same scenario without streaming (a plain JSON chat completion).
    let plain = OpenAiProvider::new(OpenAiOptions {
        name: "mock".into(),
        base_url: base_url.clone(),
        stream: false,
        ..OpenAiOptions::default()
    })
    .unwrap();
    let history = [Message::user("Say hello.")];
    let reply = plain
        .complete(CompletionRequest::new("plain_chat", &history))
        .await
        .unwrap();
    assert_eq!(reply.text, "Hello! I'm buddy's scripted model.");
    assert_eq!(reply.finish, Some(buddy_core::FinishReason::Stop));
    let unknown = plain
        .complete(CompletionRequest::new("scripted:nope", &history))
        .await
        .unwrap_err();
    assert!(
        unknown.to_string().contains("no scenario named `nope`"),
        "{unknown}"
    );
    let lines = log.text();
    assert_eq!(lines.lines().count(), 301);
    assert!(
        lines
            .lines()
            .take(300)
            .all(|l| l.contains("\"model\":\"scripted:plain_chat\""))
    );
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

/// A scenario's `wire_chunk_chars`: the text and the tool-call arguments come a few
/// characters to an event, and buddy's provider assembles the same reply from them.
#[tokio::test(flavor = "multi_thread")]
async fn wire_chunk_chars_streams_text_and_arguments_in_small_pieces() {
    buddy_providers::install_crypto_provider();
    let scenario = Scenario::parse(
        &serde_json::json!({
            "name": "tiny",
            "prompt": "p",
            "tools": [{"name": "lookup", "description": "d",
                       "parameters": {"type": "object", "properties": {"item": {"type": "string"}}}}],
            "expect": {"stop_reason": "completed", "model_calls": 2, "tool_calls": 1},
            "wire_chunk_chars": 3,
            "rules": [
                {"when": {"round": 1}, "reply": {"text": "Checking item 7 now.",
                    "tool_calls": [{"name": "lookup", "arguments": {"item": "item-7"}}]}},
                {"when": {}, "reply": {"text": "Done."}}
            ]
        })
        .to_string(),
        "test",
    )
    .unwrap();
    let mock = MockServer::new(vec![scenario], Duration::ZERO, None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(mock.serve(listener, async move {
        let _ = stopped.await;
    }));
    let tools = serde_json::json!([{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]);
    let body = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .json(&serde_json::json!({
            "model": "tiny", "stream": true, "tools": tools,
            "messages": [{"role": "user", "content": "p"}]
        }))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let (mut texts, mut arguments) = (Vec::new(), Vec::new());
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            continue;
        }
        let chunk: serde_json::Value = serde_json::from_str(data).unwrap();
        let delta = &chunk["choices"][0]["delta"];
        // The opening delta carries the role and an empty content, the call's opening
        // its id and name with empty arguments.
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            texts.push(text.to_owned());
        }
        if let Some(piece) = delta["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .filter(|a| !a.is_empty())
        {
            arguments.push(piece.to_owned());
        }
    }
    assert_eq!(texts.concat(), "Checking item 7 now.");
    assert!(texts.iter().all(|t| t.chars().count() <= 3), "{texts:?}");
    assert_eq!(texts.len(), 7);
    let whole: String = arguments.concat();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&whole).unwrap(),
        serde_json::json!({"item": "item-7"})
    );
    assert!(
        arguments.iter().all(|a| a.chars().count() <= 3),
        "{arguments:?}"
    );
    // buddy's provider reads the same reply out of the small pieces.
    let provider = OpenAiProvider::new(OpenAiOptions {
        name: "mock".into(),
        base_url: base,
        ..OpenAiOptions::default()
    })
    .unwrap();
    let history = [Message::user("p")];
    let offered = [buddy_core::ToolSpec {
        name: "lookup".into(),
        description: "d".into(),
        parameters: serde_json::json!({"type": "object"}),
    }];
    let reply = provider
        .complete(CompletionRequest::new("tiny", &history).with_tools(&offered))
        .await
        .unwrap();
    assert_eq!(reply.text, "Checking item 7 now.");
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].name, "lookup");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&reply.tool_calls[0].arguments).unwrap(),
        serde_json::json!({"item": "item-7"})
    );
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
