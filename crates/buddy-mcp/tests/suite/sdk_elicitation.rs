//! The Python MCP SDK's elicitation reaches the person: `await ctx.elicit()` (which
//! needs requests from the server mid-call: buddy speaks to the server by the 2025-11-25
//! handshake once a call shows it) and the SDK's resolver style (`input_required` on
//! 2026-07-28, a request mid-call on 2025-11-25); and server-everything's
//! `trigger-elicitation-request`.

use std::sync::{Arc, Mutex};

use buddy_core::{BoxFuture, ElicitationAnswer, ElicitationRequest, Elicitor};
use buddy_mcp::{McpServerConfig, McpSource, ServerState};
use serde_json::json;

use super::{npm_server, sdk_python, test_server};

/// Answers every question with `answer`, keeping the messages it was asked.
#[derive(Debug)]
struct Person {
    answer: ElicitationAnswer,
    asked: Mutex<Vec<String>>,
}

impl Elicitor for Person {
    fn ask(&self, request: ElicitationRequest) -> BoxFuture<'_, ElicitationAnswer> {
        self.asked.lock().unwrap().push(request.message);
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

fn person(content: serde_json::Value) -> Arc<Person> {
    Arc::new(Person {
        answer: ElicitationAnswer::Accept {
            content: content.as_object().cloned().unwrap(),
        },
        asked: Mutex::new(Vec::new()),
    })
}

fn protocol(source: &McpSource) -> String {
    match source.state() {
        ServerState::Running { protocol, .. } => protocol,
        other => panic!("not running: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdks_ctx_elicit_and_resolvers_reach_the_person() {
    let python = sdk_python();
    let script = test_server("sdk_elicit_server.py");
    let source = McpSource::new(McpServerConfig::stdio("sdk", &[&python, &script]));
    source.start().await.unwrap();
    assert_eq!(protocol(&source), "2026-07-28", "the SDK speaks 2026-07-28");
    let ada = person(json!({"name": "Ada"}));
    // The resolver style over `input_required`, on the 2026-07-28 connection.
    let text = source
        .call_asking("book_resolved", json!({"table": "7"}), Some(ada.clone()))
        .await
        .unwrap();
    assert!(text.contains("book_resolved 7: accept Ada"), "{text}");
    // `ctx.elicit()` cannot ask on 2026-07-28: buddy changes to the handshake and the
    // question reaches the person.
    let text = source
        .call_asking("book", json!({"table": "9"}), Some(ada.clone()))
        .await
        .unwrap();
    assert!(text.contains("book 9: accept Ada"), "{text}");
    assert_eq!(protocol(&source), "2025-11-25");
    // Both styles keep working on the handshake connection.
    let bob = person(json!({"name": "Bob"}));
    let text = source
        .call_asking("book", json!({"table": "3"}), Some(bob.clone()))
        .await
        .unwrap();
    assert!(text.contains("book 3: accept Bob"), "{text}");
    let text = source
        .call_asking("book_resolved", json!({"table": "4"}), Some(bob.clone()))
        .await
        .unwrap();
    assert!(text.contains("book_resolved 4: accept Bob"), "{text}");
    assert_eq!(
        *ada.asked.lock().unwrap(),
        ["Who is table 7 for (resolver)?", "Who is table 9 for?"]
    );
    assert_eq!(
        *bob.asked.lock().unwrap(),
        ["Who is table 3 for?", "Who is table 4 for (resolver)?"]
    );
    // Nobody to ask: declined, and the server says so.
    let text = source.call("book", json!({"table": "5"})).await.unwrap();
    assert!(text.contains("book 5: decline"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everythings_elicitation_reaches_the_person() {
    let server = npm_server("mcp-server-everything");
    let source = McpSource::new(McpServerConfig::stdio("everything", &[&server]));
    let tools = source.start().await.unwrap();
    assert!(
        tools
            .iter()
            .any(|t| t.name == "trigger-elicitation-request"),
        "{:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    let answer = person(json!({"name": "Ada Lovelace"}));
    let text = source
        .call_asking(
            "trigger-elicitation-request",
            json!({}),
            Some(answer.clone()),
        )
        .await
        .unwrap();
    assert_eq!(answer.asked.lock().unwrap().len(), 1);
    assert!(text.contains("Ada Lovelace"), "{text}");
}
