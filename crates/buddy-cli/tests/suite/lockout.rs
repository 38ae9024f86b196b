//! Nobody locks the server out: a real `buddy serve` on 127.0.0.1 with its default
//! limits, while 2,000 connections from twenty other loopback addresses are held open —
//! silent, sending one request and then nothing, sending headers a line at a time,
//! trickling a body a byte a second — and reopened as soon as they are closed. A client
//! with a key still completes a turn and `/healthz` still answers, in under a second.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::crash::spawn_server;
use super::server::{all_scenarios, client, sse_events};

const KEY: &str = "sk-lockout-test";
const ATTACKERS: usize = 2_000;

#[derive(Clone, Copy)]
enum Attack {
    /// Connects and sends nothing.
    Silent,
    /// One request, its answer, then nothing on the kept-alive connection.
    OneThenNothing,
    /// A request head, one header line every 2 s.
    SlowHeaders,
    /// A whole head announcing 100 kB, then one byte of body a second.
    Trickle,
}

/// Lets this process hold the attack's sockets (a soft limit of 1,024 is common).
fn raise_open_files() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        },
    );
}

async fn connect_from(last: u8, addr: std::net::SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(std::net::SocketAddr::from(([127, 0, 0, last], 0)))?;
    socket.connect(addr).await
}

/// One attacker: holds a connection the way `attack` says, and opens another as soon as
/// the server closes it, until `stop`.
async fn attacker(
    attack: Attack,
    from: u8,
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicUsize>,
) {
    let mut buf = [0u8; 1024];
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut stream) = connect_from(from, addr).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        opened.fetch_add(1, Ordering::Relaxed);
        let held = async {
            match attack {
                Attack::Silent => {
                    let _ = stream.read(&mut buf).await;
                }
                Attack::OneThenNothing => {
                    let _ = stream
                        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
                        .await;
                    while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                }
                Attack::SlowHeaders => {
                    let mut head: &[u8] = b"POST /v1/chat HTTP/1.1\r\nhost: x\r\n";
                    while stream.write_all(head).await.is_ok() {
                        head = b"x-slow: 1\r\n";
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                }
                Attack::Trickle => {
                    let mut next: &[u8] = b"POST /v1/chat HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{";
                    while stream.write_all(next).await.is_ok() {
                        next = b" ";
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        };
        tokio::select! {
            () = held => {}
            () = async { while !stop.load(Ordering::Relaxed) { tokio::time::sleep(Duration::from_millis(200)).await } } => {}
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `GET /healthz` on a fresh connection from 127.0.0.1: its status line and how long
/// the answer took.
async fn health(addr: std::net::SocketAddr) -> (String, Duration) {
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(30), async {
        let mut stream = connect_from(1, addr).await.ok()?;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut out = Vec::new();
        stream.read_to_end(&mut out).await.ok()?;
        Some(String::from_utf8_lossy(&out).lines().next()?.to_owned())
    })
    .await
    .ok()
    .flatten()
    .unwrap_or_else(|| "no answer".to_owned());
    (answer, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_idle_slow_and_trickling_connections_lock_nobody_out() {
    raise_open_files();
    let (dir, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let db = dir.path().join("lockout.db");
    let (mut server, url) = spawn_server(
        &db,
        scenarios.path(),
        dir.path(),
        &[("BUDDY_API_KEYS", KEY)],
    );
    let addr: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let kinds = [
        Attack::Silent,
        Attack::OneThenNothing,
        Attack::SlowHeaders,
        Attack::Trickle,
    ];
    let mut attackers = Vec::new();
    for n in 0..ATTACKERS {
        // 100 connections from each of 127.0.0.2 ..= 127.0.0.21.
        let from = 2 + u8::try_from(n / 100).unwrap();
        attackers.push(tokio::spawn(attacker(
            kinds[n % kinds.len()],
            from,
            addr,
            Arc::clone(&stop),
            Arc::clone(&opened),
        )));
    }
    // Every attacker has connected at least once (many more than the 1,024 the table
    // holds), and they keep coming back.
    let ramp = Instant::now();
    while opened.load(Ordering::Relaxed) < ATTACKERS && ramp.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        opened.load(Ordering::Relaxed) >= ATTACKERS,
        "the attack got going"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;

    // /healthz, ten times over fresh connections.
    let mut times = Vec::new();
    for _ in 0..10 {
        let (status, took) = health(addr).await;
        assert_eq!(status, "HTTP/1.1 200 OK", "after {took:?}");
        times.push(took);
    }
    times.sort();
    let median = times[times.len() / 2];
    // A client with a key completes a whole turn.
    let body = client()
        .post(format!("{url}/v1/chat"))
        .bearer_auth(KEY)
        .json(&json!({"message": "what time is it?", "model": "scripted:offline_assistant"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = sse_events(&body);
    let last = events
        .last()
        .map(|(name, data)| (name.clone(), data["reason"].clone()));
    // The table was full all along: connections were shed to make room.
    let metrics = client()
        .get(format!("{url}/metrics"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    for attacker in attackers {
        attacker.abort();
    }
    server.kill().unwrap();
    server.wait().unwrap();

    eprintln!(
        "lockout: {} connections opened by the attack; /healthz median {median:?}, slowest {:?}",
        opened.load(Ordering::Relaxed),
        times.last().copied().unwrap_or_default()
    );
    assert!(
        median < Duration::from_secs(1),
        "/healthz median {median:?}"
    );
    assert_eq!(
        last,
        Some(("done".to_owned(), json!("completed"))),
        "{body}"
    );
    let shed: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("buddy_connections_shed_total"))
        .collect();
    assert!(
        shed.iter()
            .any(|l| l.contains("reason=\"unauthenticated\"")),
        "{shed:?}"
    );
}
