//! Slow, silent and idle clients against a real socket on 127.0.0.1: each is cut off by
//! its timeout, a full connection table sheds them before clients with a key, one
//! address holds only so many, bodies have one deadline in all, and shutdown ends in
//! bounded time whatever they do. Time is a test bound here (`WITHIN`), never what is
//! asserted.

use std::sync::Arc;
use std::time::Duration;

use buddy_engine::PolicyConfig;
use buddy_server::{ApiKey, AppState, ServerSettings, serve};
use buddy_store::SqliteStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::Hello;

pub(super) const WITHIN: Duration = Duration::from_secs(20);

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

pub(super) fn quick() -> ServerSettings {
    ServerSettings {
        header_timeout: Duration::from_millis(500),
        body_timeout: Duration::from_millis(500),
        shutdown_grace: Duration::from_millis(500),
        ..ServerSettings::default()
    }
}

/// Reads until the server closes the connection; returns what it sent.
pub(super) async fn until_closed(stream: &mut TcpStream) -> String {
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

/// A connection to `addr` from the loopback address `from` (127.0.0.x).
pub(super) async fn connect_from(from: [u8; 4], addr: std::net::SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::from((from, 0))).unwrap();
    socket.connect(addr).await.unwrap()
}

/// Sends one request on `stream` and reads its whole answer (`content-length` bodies).
pub(super) async fn ask(stream: &mut TcpStream, head: &str) -> String {
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(WITHIN, async {
        loop {
            let n = stream.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&out);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head.lines().find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                });
                if length.is_some_and(|n| body.len() >= n) {
                    break;
                }
            }
        }
    })
    .await
    .expect("an answer in time");
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_connection_that_never_sends_a_byte_is_closed() {
    let (addr, _stop, _server) = start(quick()).await;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    assert_eq!(until_closed(&mut silent).await, "");
    // Half the HTTP/2 preface is not waited on forever either.
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    assert_eq!(until_closed(&mut half).await, "");
}

#[tokio::test]
async fn an_http2_connection_that_only_answers_pings_is_closed_when_idle() {
    let (addr, _stop, _server) = start(quick()).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    // Answer every PING (and acknowledge SETTINGS) like a live client that asks nothing.
    let closed = tokio::time::timeout(WITHIN, async {
        let mut header = [0u8; 9];
        loop {
            if stream.read_exact(&mut header).await.is_err() {
                return;
            }
            let length =
                usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
            let mut payload = vec![0u8; length];
            if stream.read_exact(&mut payload).await.is_err() {
                return;
            }
            let (kind, flags) = (header[3], header[4]);
            let reply: Option<Vec<u8>> = match (kind, flags & 1) {
                (4, 0) => Some(vec![0, 0, 0, 4, 1, 0, 0, 0, 0]),
                (6, 0) => {
                    let mut ack = vec![0, 0, 8, 6, 1, 0, 0, 0, 0];
                    ack.extend_from_slice(&payload);
                    Some(ack)
                }
                _ => None,
            };
            if let Some(reply) = reply
                && stream.write_all(&reply).await.is_err()
            {
                return;
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "an idle HTTP/2 connection must be closed");
}

#[tokio::test]
async fn one_address_may_hold_only_so_many_connections() {
    let settings = ServerSettings {
        header_timeout: Duration::from_secs(30),
        max_connections_per_address: 4,
        api_keys: vec![ApiKey::new("sk-share", None, false)],
        ..quick()
    };
    let (addr, _stop, _server) = start(settings).await;
    // Four connections of clients with a key, idle (silent ones would make room: see
    // `shedding.rs`).
    let models = "GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-share\r\n\r\n";
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut stream = connect_from([127, 0, 0, 1], addr).await;
        let answer = ask(&mut stream, models).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        held.push(stream);
    }
    let mut fifth = connect_from([127, 0, 0, 1], addr).await;
    let answer = until_closed(&mut fifth).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("too many connections from your address"),
        "{answer}"
    );
    // Another address is served.
    let mut other = connect_from([127, 0, 0, 2], addr).await;
    let answer = ask(&mut other, "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    // A closed one makes room again.
    drop(held.pop());
    let mut again = None;
    for _ in 0..50 {
        let mut stream = connect_from([127, 0, 0, 1], addr).await;
        let answer = ask(&mut stream, "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
        if answer.starts_with("HTTP/1.1 200 OK") {
            again = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(again.is_some(), "the address is served once it holds fewer");
}

#[tokio::test]
async fn a_full_table_sheds_silent_connections_before_a_client_with_a_key() {
    let settings = ServerSettings {
        header_timeout: Duration::from_secs(30),
        max_connections: 4,
        api_keys: vec![ApiKey::new("sk-shed", None, false)],
        ..quick()
    };
    let (addr, _stop, _server) = start(settings).await;
    let models = "GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-shed\r\n\r\n";
    let mut keyed = TcpStream::connect(addr).await.unwrap();
    let answer = ask(&mut keyed, models).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    // The keyed connection now idles; eight silent ones come, twice what is left.
    let mut silent = Vec::new();
    for _ in 0..8 {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    let mut health = TcpStream::connect(addr).await.unwrap();
    let answer = ask(&mut health, "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    // The oldest silent ones were shed, not the idle client with a key.
    let answer = until_closed(&mut silent[0]).await;
    assert_eq!(answer, "");
    let answer = ask(&mut keyed, models).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
}

#[tokio::test]
async fn a_body_trickled_byte_by_byte_is_cut_off_at_one_deadline_for_the_whole_body() {
    let settings = ServerSettings {
        body_timeout: Duration::from_secs(1),
        ..quick()
    };
    let (addr, _stop, _server) = start(settings).await;
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    write
        .write_all(b"POST /v1/chat HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n")
        .await
        .unwrap();
    // One byte every 200 ms: each arrives well within the deadline, the whole would
    // take 20 s.
    let trickle = tokio::spawn(async move {
        let mut sent = 0;
        while sent < 100 {
            if write.write_all(b" ").await.is_err() {
                break;
            }
            sent += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        sent
    });
    let mut out = Vec::new();
    let _ = tokio::time::timeout(WITHIN, read.read_to_end(&mut out)).await;
    let answer = String::from_utf8_lossy(&out);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive within 1 s"), "{answer}");
    trickle.abort();
    let sent = trickle.await.unwrap_or(0);
    assert!(
        sent < 100,
        "cut off before the body was complete ({sent} bytes)"
    );
}

#[tokio::test]
async fn a_malformed_or_oversized_chunked_body_is_a_4xx_that_says_so() {
    let settings = ServerSettings {
        max_body_bytes: 1000,
        ..quick()
    };
    let (addr, _stop, _server) = start(settings).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let answer = ask(
        &mut stream,
        "POST /v1/chat HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("could not be read"), "{answer}");

    let mut stream = TcpStream::connect(addr).await.unwrap();
    let chunk = "x".repeat(600);
    let request = format!(
        "POST /v1/chat HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n258\r\n{chunk}\r\n258\r\n{chunk}\r\n0\r\n\r\n"
    );
    let answer = ask(&mut stream, &request).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
}
