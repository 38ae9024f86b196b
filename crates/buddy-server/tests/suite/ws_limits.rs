//! WebSocket sessions of `/v1/responses` against the connection's rules (issue 46, item
//! 5): each holds its connection's place in the table and is shed like an idle
//! connection, one key holds only so many, pings do not keep an idle session open, a
//! client that never reads is closed at the send timeout, and an over-size message is
//! answered with a close frame (1009). Real server on 127.0.0.1; time bounds the test,
//! it is never what is asserted.

use std::sync::Arc;
use std::time::Duration;

use buddy_engine::PolicyPatch;
use buddy_server::{ApiKey, Backend, BackendError, Resolved, ServerSettings};
use buddy_testkit::{ReplyProvider, TestToolbox, reply_tokens};
use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::Hello;
use super::connections::{WITHIN, ask, connect_from, quick};
use super::shedding::start_with;

const KEY: &str = "sk-ws-limits";

type Socket<S> = tokio_tungstenite::WebSocketStream<S>;

fn settings(settings: ServerSettings) -> ServerSettings {
    ServerSettings {
        api_keys: vec![ApiKey::new(KEY, None, false)],
        header_timeout: Duration::from_secs(30),
        shutdown_grace: Duration::from_millis(200),
        ..settings
    }
}

/// A WebSocket session of `/v1/responses` from 127.0.0.1 (`Err`: the refusal).
async fn session(
    addr: std::net::SocketAddr,
) -> Result<Socket<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>, String> {
    let mut request = format!("ws://{addr}/v1/responses")
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {KEY}").parse().unwrap());
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(socket, _)| socket)
        .map_err(|e| e.to_string())
}

fn create(model: &str) -> Message {
    let event = json!({"type": "response.create", "model": model, "input": "hi"});
    Message::Text(event.to_string().into())
}

/// Reads until the server closes the session; its close code, if it sent one.
async fn closed<S>(socket: &mut Socket<S>) -> Option<CloseCode>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    tokio::time::timeout(WITHIN, async {
        while let Some(message) = socket.next().await {
            match message {
                Ok(Message::Close(frame)) => return frame.map(|f| f.code),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
        None
    })
    .await
    .expect("the server must close the session by itself")
}

#[tokio::test]
async fn one_key_holds_only_so_many_websocket_sessions() {
    let settings = settings(ServerSettings {
        max_websockets_per_key: 2,
        ..quick()
    });
    let (addr, _stop) = start_with(Arc::new(Hello), settings).await;
    let first = session(addr).await.unwrap();
    let _second = session(addr).await.unwrap();
    let third = session(addr).await.err().unwrap_or_default();
    assert!(third.contains("429"), "{third}");
    drop(first);
    let mut again = Err(String::new());
    for _ in 0..50 {
        again = session(addr).await;
        if again.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(again.is_ok(), "a session that ends makes room: {again:?}");
}

#[tokio::test]
async fn an_idle_websocket_session_holds_a_place_in_the_table_and_is_shed_for_a_newcomer() {
    let settings = settings(ServerSettings {
        max_connections: 2,
        ..quick()
    });
    let (addr, _stop) = start_with(Arc::new(Hello), settings).await;
    let mut oldest = session(addr).await.unwrap();
    let mut newer = session(addr).await.unwrap();
    // The table is full of sessions (the issue saw 1,024 of one key): a client elsewhere
    // is still answered, the idlest session making room.
    let mut other = connect_from([127, 0, 0, 2], addr).await;
    let answer = ask(&mut other, "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert_eq!(closed(&mut oldest).await, Some(CloseCode::Again));
    // The other session still answers.
    newer.send(create("scripted:hello")).await.unwrap();
    let reply = tokio::time::timeout(WITHIN, newer.next()).await.unwrap();
    assert!(matches!(reply, Some(Ok(Message::Text(_)))), "{reply:?}");
}

#[tokio::test]
async fn pings_do_not_keep_an_idle_websocket_session_open() {
    let settings = settings(ServerSettings {
        websocket_idle_timeout: Duration::from_secs(1),
        ..quick()
    });
    let (addr, _stop) = start_with(Arc::new(Hello), settings).await;
    let socket = session(addr).await.unwrap();
    let (mut write, mut read) = socket.split();
    // A ping every 200 ms, and never a request.
    let pinging = tokio::spawn(async move {
        while write
            .send(Message::Ping(b"alive".to_vec().into()))
            .await
            .is_ok()
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let ended = tokio::time::timeout(WITHIN, async {
        while let Some(Ok(_)) = read.next().await {}
    })
    .await;
    pinging.abort();
    assert!(ended.is_ok(), "the session must be closed though it pings");
}

#[tokio::test]
async fn an_over_size_websocket_message_is_answered_with_close_1009() {
    let settings = settings(ServerSettings {
        max_body_bytes: 1000,
        ..quick()
    });
    let (addr, _stop) = start_with(Arc::new(Hello), settings).await;
    let mut socket = session(addr).await.unwrap();
    let big =
        json!({"type": "response.create", "model": "scripted:hello", "input": "x".repeat(5000)});
    socket
        .send(Message::Text(big.to_string().into()))
        .await
        .unwrap();
    assert_eq!(closed(&mut socket).await, Some(CloseCode::Size));
}

/// A model whose one reply is 8 MB of text: more than socket buffers hold.
struct Chatty;

impl Backend for Chatty {
    fn models(&self) -> Vec<String> {
        vec!["chatty".into()]
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        let reply = ReplyProvider::new(|_, _| Ok(reply_tokens(&"x".repeat(8 << 20), vec![])));
        Ok(Resolved {
            provider: Arc::new(reply),
            toolbox: Arc::new(TestToolbox::new()),
            model: "chatty".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

#[tokio::test]
async fn a_websocket_client_that_never_reads_is_closed_at_the_send_timeout() {
    let settings = settings(ServerSettings {
        max_websockets_per_key: 1,
        websocket_send_timeout: Duration::from_millis(500),
        ..quick()
    });
    let (addr, _stop) = start_with(Arc::new(Chatty), settings).await;
    // A small receive window, and nothing ever read.
    let tcp = tokio::net::TcpSocket::new_v4().unwrap();
    tcp.set_recv_buffer_size(4096).unwrap();
    let stream = tcp.connect(addr).await.unwrap();
    let mut request = format!("ws://{addr}/v1/responses")
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {KEY}").parse().unwrap());
    let (mut stalled, _) = tokio_tungstenite::client_async(request, stream)
        .await
        .unwrap();
    stalled.send(create("chatty")).await.unwrap();
    // The key's one session is taken until the server gives up on the stalled client.
    let mut next = Err(String::new());
    for _ in 0..200 {
        next = session(addr).await;
        if next.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(next.is_ok(), "the stalled session must end: {next:?}");
    drop(stalled);
}
