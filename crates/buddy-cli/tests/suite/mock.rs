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
