//! Slow and idle clients against a real socket on 127.0.0.1: each is cut off by its
//! timeout, they cannot starve other clients, and shutdown ends in bounded time
//! whatever they do. Time is a test bound here (`WITHIN`), never what is asserted.

use std::sync::Arc;
use std::time::Duration;

use buddy_engine::PolicyConfig;
use buddy_server::{AppState, ServerSettings, serve};
use buddy_store::SqliteStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Hello;

const WITHIN: Duration = Duration::from_secs(20);

async fn start(
    settings: ServerSettings,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let state = AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Hello),
        PolicyConfig::default(),
        settings,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        serve(state, listener, async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    (addr, stop, server)
}

fn quick() -> ServerSettings {
    ServerSettings {
        header_timeout: Duration::from_millis(500),
        body_timeout: Duration::from_millis(500),
        shutdown_grace: Duration::from_millis(500),
        ..ServerSettings::default()
    }
}

/// Reads until the server closes the connection; returns what it sent.
async fn until_closed(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(WITHIN, stream.read_to_end(&mut out))
        .await
        .expect("the server must close a slow connection by itself");
    String::from_utf8_lossy(&out).into_owned()
}

async fn health(addr: std::net::SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    until_closed(&mut stream).await
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off() {
    let (addr, _stop, _server) = start(quick()).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let answer = until_closed(&mut stream).await;
    assert!(!answer.contains("200 OK"), "{answer}");
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed() {
    let (addr, _stop, _server) = start(quick()).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    // One answer, then nothing more is asked: the connection must not stay open.
    let answer = until_closed(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
}

#[tokio::test]
async fn a_body_that_trickles_gets_408() {
    let (addr, _stop, _server) = start(quick()).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            b"POST /v1/chat HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"mess",
        )
        .await
        .unwrap();
    let answer = until_closed(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive within 0.5 s"), "{answer}");
}

#[tokio::test]
async fn many_slow_clients_do_not_keep_others_out() {
    let settings = ServerSettings {
        max_connections: 16,
        ..quick()
    };
    let (addr, _stop, _server) = start(settings).await;
    // Twice the connection cap, each sending half a request head and then nothing.
    let mut slow = Vec::new();
    for _ in 0..32 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let _ = stream.write_all(b"GET /healthz HTTP/1.1\r\n").await;
        slow.push(stream);
    }
    // A well-behaved client still gets its answer: the slow ones are cut off in turn.
    let answer = health(addr).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    drop(slow);
}

#[tokio::test]
async fn shutdown_ends_in_bounded_time_whatever_the_clients_do() {
    let settings = ServerSettings {
        // Long client timeouts: only shutdown's own bounds can end these connections.
        header_timeout: Duration::from_secs(300),
        body_timeout: Duration::from_secs(300),
        shutdown_grace: Duration::from_millis(500),
        ..ServerSettings::default()
    };
    let (addr, stop, server) = start(settings).await;
    let mut held = Vec::new();
    for _ in 0..20 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let _ = stream
            .write_all(b"POST /v1/chat HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n{")
            .await;
        held.push(stream);
    }
    // An idle connection too, and one that sent nothing at all.
    held.push(TcpStream::connect(addr).await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = stop.send(());
    tokio::time::timeout(WITHIN, server)
        .await
        .expect("serve must return after the grace period and its margin")
        .unwrap();
    // The listener is gone: nothing new is accepted.
    assert!(TcpStream::connect(addr).await.is_err() || health_fails(addr).await);
}

async fn health_fails(addr: std::net::SocketAddr) -> bool {
    tokio::time::timeout(Duration::from_secs(2), health(addr))
        .await
        .map_or(true, |answer| !answer.contains("200 OK"))
}
