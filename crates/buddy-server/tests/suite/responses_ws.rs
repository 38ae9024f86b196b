//! `/v1/responses` over a WebSocket, through the real server (`serve`, so the HTTP
//! upgrade goes through buddy's own connection handling): sequential responses, a
//! `store: false` continuation on the same connection only, `previous_response_not_found`,
//! a bad event named, and the key required.

use std::sync::Arc;
use std::time::Duration;

use buddy_engine::PolicyConfig;
use buddy_server::{ApiKey, AppState, ServerSettings, serve};
use buddy_store::SqliteStore;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::Hello;

const KEY: &str = "sk-ws";

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn server(settings: ServerSettings) -> (String, tokio::sync::oneshot::Sender<()>) {
    let state = AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Hello),
        PolicyConfig::default(),
        ServerSettings {
            api_keys: vec![ApiKey::new(KEY, None, false)],
            ..settings
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/v1/responses", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = serve(state, listener, async move {
            let _ = stopped.await;
        })
        .await;
    });
    (url, stop)
}

async fn connect(url: &str, key: Option<&str>) -> Result<Socket, String> {
    let mut request = url.into_client_request().unwrap();
    if let Some(key) = key {
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {key}").parse().unwrap());
    }
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(socket, _)| socket)
        .map_err(|e| e.to_string())
}

/// Sends one event and reads until a terminal event or an error; returns every event.
async fn turn(socket: &mut Socket, event: Value) -> Vec<Value> {
    socket
        .send(Message::Text(event.to_string().into()))
        .await
        .unwrap();
    let mut events = Vec::new();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(20), socket.next())
            .await
            .expect("an event within 20 s")
            .expect("the connection stays open")
            .unwrap();
        let Message::Text(text) = message else {
            continue;
        };
        let event: Value = serde_json::from_str(&text).unwrap();
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        events.push(event);
        if matches!(
            kind.as_str(),
            "response.completed" | "response.failed" | "response.incomplete" | "error"
        ) {
            return events;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_stream_over_a_websocket_and_unstored_ones_continue_only_there() {
    let (url, _stop) = server(ServerSettings::default()).await;
    assert!(
        connect(&url, None).await.unwrap_err().contains("401"),
        "the key is required"
    );
    let mut socket = connect(&url, Some(KEY)).await.unwrap();
    let first = turn(
        &mut socket,
        json!({"type": "response.create", "model": "scripted:hello", "store": false, "input": "hi"}),
    )
    .await;
    let kinds: Vec<&str> = first.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"response.created"));
    assert_eq!(kinds.last(), Some(&"response.completed"));
    assert!(kinds.contains(&"response.output_text.delta"), "{kinds:?}");
    let numbers: Vec<u64> = first
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
    let id = first.last().unwrap()["response"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Continued on the same connection: the model sees the first exchange.
    let second = turn(
        &mut socket,
        json!({"type": "response.create", "model": "scripted:hello", "store": false,
               "previous_response_id": id, "input": "and again"}),
    )
    .await;
    let done = second.last().unwrap();
    assert_eq!(done["type"], "response.completed", "{done}");
    assert_eq!(done["response"]["previous_response_id"], json!(id));

    // Only the latest response is kept: the first cannot be continued now.
    let stale = turn(
        &mut socket,
        json!({"type": "response.create", "model": "scripted:hello", "store": false,
               "previous_response_id": id, "input": "once more"}),
    )
    .await;
    let error = stale.last().unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["status"], 404);
    assert_eq!(error["error"]["code"], "previous_response_not_found");

    // A bad event is named, and the connection goes on.
    let bad = turn(&mut socket, json!({"type": "response.cancel"})).await;
    assert_eq!(bad.last().unwrap()["status"], 400);
    assert!(
        bad.last().unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`response.cancel`"),
        "{bad:?}"
    );
    let after = turn(
        &mut socket,
        json!({"type": "response.create", "model": "scripted:hello", "input": "still here?"}),
    )
    .await;
    assert_eq!(after.last().unwrap()["type"], "response.completed");

    // Another connection does not have this one's unstored responses.
    let second_id = done["response"]["id"].as_str().unwrap();
    let mut other = connect(&url, Some(KEY)).await.unwrap();
    let missing = turn(
        &mut other,
        json!({"type": "response.create", "model": "scripted:hello", "store": false,
               "previous_response_id": second_id, "input": "hello?"}),
    )
    .await;
    assert_eq!(
        missing.last().unwrap()["error"]["code"],
        "previous_response_not_found"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_websocket_is_closed_and_sessions_are_bounded() {
    let (url, _stop) = server(ServerSettings {
        websocket_idle_timeout: Duration::from_millis(300),
        max_connections: 2,
        ..ServerSettings::default()
    })
    .await;
    let mut idle = connect(&url, Some(KEY)).await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match idle.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "an idle session is closed by the server");

    // Sessions hold places in the connection table: a third takes the idlest's place.
    let mut a = connect(&url, Some(KEY)).await.unwrap();
    let _b = connect(&url, Some(KEY)).await.unwrap();
    let _c = connect(&url, Some(KEY)).await.unwrap();
    let shed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match a.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(shed.is_ok(), "the idlest session made room");
}
