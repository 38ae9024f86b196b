//! Nobody locks the server out (issues 38 and 46): a real `buddy serve` on 127.0.0.1 with
//! its default limits, attacked by 2,000 hostile connections of each kind at once — idle
//! (silent, one request then nothing, headers a line at a time), slow body (a byte a
//! second), readers of the attacking key's own running turns, and WebSocket sessions that
//! only ping — first all from one address, then from twenty, each reopened as soon as it
//! is closed. A client with a key still completes a turn and `/healthz` answers every
//! time. The figures (answer times, connections the attack opened, sheds) are printed,
//! never asserted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::crash::spawn_server;
use super::server::{all_scenarios, client, sse_events};

const KEY: &str = "sk-lockout-test";
/// The attacker's own key: its readers and WebSocket sessions are its own.
const ATTACKER_KEY: &str = "sk-lockout-attacker";
/// Hostile connections of each kind.
const EACH: usize = 2_000;

#[derive(Clone, Copy, Debug)]
enum Attack {
    /// Connects and sends nothing.
    Silent,
    /// One request, its answer, then nothing on the kept-alive connection.
    OneThenNothing,
    /// A request head, one header line every 2 s.
    SlowHeaders,
    /// A whole head announcing 100 kB, then one byte of body a second.
    Trickle,
    /// Reads one of the attacker's running turns, with the attacker's key.
    Reader,
    /// A `/v1/responses` WebSocket session with the attacker's key that sends only pings.
    WebSocket,
}

impl Attack {
    /// The kind of the `n`th of `EACH` attackers of a group.
    fn of_group(group: usize, n: usize) -> Self {
        match group {
            0 => [Attack::Silent, Attack::OneThenNothing, Attack::SlowHeaders][n % 3],
            1 => Attack::Trickle,
            2 => Attack::Reader,
            _ => Attack::WebSocket,
        }
    }
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
    turn: String,
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
                Attack::Reader => {
                    let head = format!(
                        "GET /v1/turns/{turn}/events HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ATTACKER_KEY}\r\n\r\n"
                    );
                    let _ = stream.write_all(head.as_bytes()).await;
                    while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                }
                Attack::WebSocket => {
                    let head = format!(
                        "GET /v1/responses HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\nauthorization: Bearer {ATTACKER_KEY}\r\n\r\n"
                    );
                    let _ = stream.write_all(head.as_bytes()).await;
                    // An empty masked ping every 2 s, and never a request.
                    loop {
                        tokio::select! {
                            read = stream.read(&mut buf) => if !matches!(read, Ok(n) if n > 0) { break },
                            () = tokio::time::sleep(Duration::from_secs(2)) => {
                                if stream.write_all(&[0x89, 0x80, 0, 0, 0, 0]).await.is_err() { break }
                            }
                        }
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
async fn health_check(addr: std::net::SocketAddr) -> (String, Duration) {
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

/// Starts one of the attacker's turns (a tool that takes a minute) and returns its id.
async fn attackers_turn(url: &str) -> String {
    let mut response = client()
        .post(format!("{url}/v1/chat"))
        .bearer_auth(ATTACKER_KEY)
        .json(&json!({"message": "wait for it", "model": "scripted:slow_tool"}))
        .send()
        .await
        .unwrap();
    let first = String::from_utf8_lossy(&response.chunk().await.unwrap().unwrap()).into_owned();
    sse_events(&first)[0].1["turn_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// What one phase of the attack saw.
struct Phase {
    opened: usize,
    health: Vec<(String, Duration)>,
    turn: Option<(String, serde_json::Value)>,
    turn_took: Duration,
}

/// Attacks with `EACH` connections of each kind from `addresses` (127.0.0.2 onwards)
/// and asks, meanwhile, as the client with a key would.
async fn phase(url: &str, addresses: usize) -> Phase {
    let addr: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let mut turns = Vec::new();
    for _ in 0..4 {
        turns.push(attackers_turn(url).await);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let mut attackers = Vec::new();
    for group in 0..4 {
        for n in 0..EACH {
            let from = 2 + u8::try_from(n % addresses).unwrap();
            attackers.push(tokio::spawn(attacker(
                Attack::of_group(group, n),
                from,
                addr,
                turns[n % turns.len()].clone(),
                Arc::clone(&stop),
                Arc::clone(&opened),
            )));
        }
    }
    // Every attacker has connected at least once (eight times what the table holds),
    // and they keep coming back.
    let ramp = Instant::now();
    while opened.load(Ordering::Relaxed) < 4 * EACH && ramp.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut health = Vec::new();
    for _ in 0..10 {
        health.push(health_check(addr).await);
    }
    let started = Instant::now();
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
    let turn_took = started.elapsed();
    let turn = sse_events(&body)
        .last()
        .map(|(name, data)| (name.clone(), data["reason"].clone()));
    stop.store(true, Ordering::Relaxed);
    for attacker in attackers {
        attacker.abort();
    }
    Phase {
        opened: opened.load(Ordering::Relaxed),
        health,
        turn,
        turn_took,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_hostile_connections_of_each_kind_lock_nobody_out() {
    raise_open_files();
    let (dir, scenarios) = (tempfile::tempdir().unwrap(), all_scenarios());
    let db = dir.path().join("lockout.db");
    let keys = format!("{KEY},{ATTACKER_KEY}");
    let (mut server, url) = spawn_server(
        &db,
        scenarios.path(),
        dir.path(),
        &[("BUDDY_API_KEYS", keys.as_str())],
    );
    let mut phases = Vec::new();
    for addresses in [1, 20] {
        phases.push((addresses, phase(&url, addresses).await));
        // The attack's connections drain before the next phase.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let metrics = client()
        .get(format!("{url}/metrics"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    server.kill().unwrap();
    server.wait().unwrap();

    let shed: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("buddy_connections_shed_total"))
        .collect();
    for (addresses, phase) in &phases {
        let mut times: Vec<Duration> = phase.health.iter().map(|(_, took)| *took).collect();
        times.sort();
        eprintln!(
            "lockout, {} hostile connections of each kind from {addresses} address(es): {} opened; \
             /healthz {}/{} answered, median {:?}, slowest {:?}; a keyed turn in {:?}",
            EACH,
            phase.opened,
            phase
                .health
                .iter()
                .filter(|(status, _)| status == "HTTP/1.1 200 OK")
                .count(),
            phase.health.len(),
            times[times.len() / 2],
            times.last().copied().unwrap_or_default(),
            phase.turn_took,
        );
    }
    eprintln!("lockout: {shed:?}");
    for (addresses, phase) in &phases {
        assert!(
            phase.opened >= 4 * EACH,
            "the attack got going from {addresses}"
        );
        for (status, took) in &phase.health {
            assert_eq!(
                status, "HTTP/1.1 200 OK",
                "from {addresses}, after {took:?}"
            );
        }
        assert_eq!(
            phase.turn,
            Some(("done".to_owned(), json!("completed"))),
            "from {addresses}"
        );
    }
    assert!(
        shed.iter()
            .any(|l| l.contains("reason=\"unauthenticated\"")),
        "{shed:?}"
    );
}
