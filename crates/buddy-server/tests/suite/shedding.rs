//! Round three of the connection attacks (issue 46), on a real socket on 127.0.0.x:
//! readers of a running turn are capped per key and shed like idle connections; behind a
//! trusted proxy each client counts by its forwarded address, and from anyone else the
//! header counts for nothing; one address's idle sockets do not keep out a client of the
//! same address with a key; and a client that waits before sending its request is still
//! answered while a flood churns the table. Time bounds the test (`WITHIN`), it is
//! never what is asserted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use buddy_core::{BoxFuture, CompletionRequest, Provider, ProviderError, TokenStream};
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_server::{ApiKey, AppState, Backend, BackendError, Resolved, ServerSettings, serve};
use buddy_store::SqliteStore;
use buddy_testkit::{ReplyProvider, TestToolbox, reply_tokens};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Hello;
use super::connections::{WITHIN, ask, connect_from, quick, until_closed};

const KEY: &str = "sk-round-three";

/// A model that thinks for five minutes: its turns run for as long as a test needs.
struct Stuck(ReplyProvider);

impl Provider for Stuck {
    fn name(&self) -> &str {
        "stuck"
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(300)).await;
            self.0.stream(request).await
        })
    }
}

/// Serves `Stuck` for every model.
pub(super) struct StuckBackend;

impl Backend for StuckBackend {
    fn models(&self) -> Vec<String> {
        vec!["stuck".into()]
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        let reply = ReplyProvider::new(|_, _| Ok(reply_tokens("At last.", vec![])));
        Ok(Resolved {
            provider: Arc::new(Stuck(reply)),
            toolbox: Arc::new(TestToolbox::new()),
            model: "stuck".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

/// A real server on 127.0.0.1 with `backend`; dropping the sender stops it.
pub(super) async fn start_with(
    backend: Arc<dyn Backend>,
    settings: ServerSettings,
) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let state = AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        backend,
        PolicyConfig::default(),
        settings,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = serve(state, listener, async move {
            let _ = stopped.await;
        })
        .await;
    });
    (addr, stop)
}

fn keyed(settings: ServerSettings) -> ServerSettings {
    ServerSettings {
        api_keys: vec![ApiKey::new(KEY, None, false)],
        header_timeout: Duration::from_secs(30),
        shutdown_grace: Duration::from_millis(200),
        ..settings
    }
}

/// Reads from `stream` until what came contains `needle`; returns all of it.
async fn read_until(stream: &mut TcpStream, needle: &str) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(WITHIN, async {
        while !String::from_utf8_lossy(&out).contains(needle) {
            let n = stream.read(&mut buf).await.unwrap_or(0);
            assert!(
                n > 0,
                "closed before `{needle}`: {}",
                String::from_utf8_lossy(&out)
            );
            out.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("in time");
    String::from_utf8_lossy(&out).into_owned()
}

/// Starts a turn of the stuck model from 127.0.0.`from`: its id, and the connection
/// streaming it.
async fn running_turn(addr: std::net::SocketAddr, from: u8) -> (String, TcpStream) {
    let body = r#"{"message": "take your time", "model": "stuck"}"#;
    let mut stream = connect_from([127, 0, 0, from], addr).await;
    let head = format!(
        "POST /v1/chat HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let seen = read_until(&mut stream, "\"turn_id\":\"").await;
    let id = seen
        .split("\"turn_id\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    (id, stream)
}

/// Opens a reader of `turn` from 127.0.0.`from` and waits for its answer's head.
async fn reader(addr: std::net::SocketAddr, from: u8, turn: &str) -> (TcpStream, String) {
    let mut stream = connect_from([127, 0, 0, from], addr).await;
    let head = format!(
        "GET /v1/turns/{turn}/events HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let seen = read_until(&mut stream, "\r\n\r\n").await;
    (stream, seen)
}

const HEALTH: &str = "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n";

#[tokio::test]
async fn one_key_reads_a_running_turn_only_so_many_times_at_once() {
    let settings = ServerSettings {
        max_readers_per_key: 2,
        ..keyed(quick())
    };
    let (addr, _stop) = start_with(Arc::new(StuckBackend), settings).await;
    let (turn, _stream) = running_turn(addr, 2).await;
    let (_r1, head) = reader(addr, 3, &turn).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (r2, head) = reader(addr, 4, &turn).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // From yet another address: the key's readers count, wherever they come from.
    let mut third = connect_from([127, 0, 0, 5], addr).await;
    let events = format!(
        "GET /v1/turns/{turn}/events HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\n\r\n"
    );
    let answer = ask(&mut third, &events).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(answer.contains("max_readers_per_key"), "{answer}");
    // A reader that leaves makes room for another.
    drop(r2);
    let mut again = String::new();
    for _ in 0..50 {
        let (_reader, head) = reader(addr, 5, &turn).await;
        again = head;
        if again.starts_with("HTTP/1.1 200") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(again.starts_with("HTTP/1.1 200"), "{again}");
}

#[tokio::test]
async fn readers_of_a_running_turn_are_shed_like_idle_connections() {
    // The turn's own stream and two readers fill the table (the issue saw 1,024 of them
    // lock out everyone for as long as the turn ran).
    let settings = ServerSettings {
        max_connections: 3,
        ..keyed(quick())
    };
    let (addr, _stop) = start_with(Arc::new(StuckBackend), settings).await;
    let (turn, _stream) = running_turn(addr, 2).await;
    let (mut oldest, head) = reader(addr, 2, &turn).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (_newer, head) = reader(addr, 2, &turn).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    for _ in 0..3 {
        let mut other = connect_from([127, 0, 0, 1], addr).await;
        let answer = ask(&mut other, HEALTH).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    }
    // The reader that had been reading longest made room: its stream ends.
    until_closed(&mut oldest).await;
}

#[tokio::test]
async fn behind_a_trusted_proxy_each_client_counts_by_its_forwarded_address() {
    let mut settings = ServerSettings {
        max_connections_per_address: 2,
        ..keyed(quick())
    };
    settings.set("trusted_proxies", "127.0.0.9").unwrap();
    let (addr, _stop) = start_with(Arc::new(Hello), settings).await;
    let models = |client: &str| {
        format!(
            "GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\nx-forwarded-for: {client}\r\n\r\n"
        )
    };
    // Six keyed clients through the proxy, each holding its kept-alive connection:
    // three times one address's share, all answered.
    let mut held = Vec::new();
    for n in 1..=6 {
        let mut stream = connect_from([127, 0, 0, 9], addr).await;
        let answer = ask(&mut stream, &models(&format!("203.0.113.{n}"))).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        held.push(stream);
    }
    // One client through the proxy holds its own share: its third is refused, another
    // client's is not; a client may not pass itself off as another on the left.
    let mut second = connect_from([127, 0, 0, 9], addr).await;
    let answer = ask(&mut second, &models("203.0.113.1")).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    let mut third = connect_from([127, 0, 0, 9], addr).await;
    let forged = models("198.51.100.1, 203.0.113.1");
    let answer = ask(&mut third, &forged).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("too many connections from your address"),
        "{answer}"
    );
    let mut other = connect_from([127, 0, 0, 9], addr).await;
    let answer = ask(&mut other, &models("203.0.113.7")).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");

    // From a peer that is not trusted, the header counts for nothing: two keyed
    // connections fill that address's share whatever they claim.
    let mut untrusted = Vec::new();
    for n in 1..=2 {
        let mut stream = connect_from([127, 0, 0, 8], addr).await;
        let answer = ask(&mut stream, &models(&format!("192.0.2.{n}"))).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        untrusted.push(stream);
    }
    let mut over = connect_from([127, 0, 0, 8], addr).await;
    let answer = until_closed(&mut over).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
}

#[tokio::test]
async fn idle_sockets_of_one_address_do_not_keep_out_a_client_of_that_address_with_a_key() {
    let settings = ServerSettings {
        max_connections_per_address: 8,
        ..keyed(quick())
    };
    let (addr, _stop) = start_with(Arc::new(Hello), settings).await;
    // The address's whole share, silent (as 256 idle sockets behind one NAT were).
    let mut silent = Vec::new();
    for _ in 0..8 {
        silent.push(connect_from([127, 0, 0, 6], addr).await);
    }
    let models =
        format!("GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\n\r\n");
    for _ in 0..3 {
        let mut client = connect_from([127, 0, 0, 6], addr).await;
        let answer = ask(&mut client, &models).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    }
    // The oldest silent one made room.
    assert_eq!(until_closed(&mut silent[0]).await, "");
}

/// Flood connections from 127.0.0.`from` until `stop`: each silent (or, `keyed`,
/// sending a body a byte at a time), reopened at once when the server closes it.
async fn flood(addr: std::net::SocketAddr, from: u8, keyed: bool, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        let _ = socket.bind(std::net::SocketAddr::from(([127, 0, 0, from], 0)));
        let Ok(mut stream) = socket.connect(addr).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        if keyed {
            let head = format!(
                "POST /v1/chat HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {KEY}\r\ncontent-length: 100000\r\n\r\n{{"
            );
            let _ = stream.write_all(head.as_bytes()).await;
        }
        let mut buf = [0u8; 256];
        let held = async {
            loop {
                tokio::select! {
                    read = stream.read(&mut buf) => if !matches!(read, Ok(n) if n > 0) { return },
                    () = tokio::time::sleep(Duration::from_millis(200)) => {
                        if keyed && stream.write_all(b" ").await.is_err() { return }
                    }
                }
                if stop.load(Ordering::Relaxed) {
                    return;
                }
            }
        };
        held.await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_waits_before_sending_is_answered_while_a_flood_churns_the_table() {
    let settings = ServerSettings {
        max_connections: 32,
        ..keyed(quick())
    };
    let (addr, _stop) = start_with(Arc::new(Hello), settings).await;
    for keyed in [false, true] {
        let stop = Arc::new(AtomicBool::new(false));
        // Three times the table, from four addresses, reconnecting as soon as shed.
        let floods: Vec<_> = (0..96)
            .map(|n| tokio::spawn(flood(addr, 2 + (n % 4) as u8, keyed, Arc::clone(&stop))))
            .collect();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut answered = 0;
        for wait in [300, 1000, 300, 1000, 300, 1000] {
            let mut client = connect_from([127, 0, 0, 1], addr).await;
            tokio::time::sleep(Duration::from_millis(wait)).await;
            let answer = ask(&mut client, HEALTH).await;
            assert!(
                answer.starts_with("HTTP/1.1 200 OK"),
                "sent {wait} ms after connecting (keyed flood: {keyed}): {answer:?}"
            );
            answered += 1;
        }
        stop.store(true, Ordering::Relaxed);
        for flood in floods {
            flood.abort();
        }
        assert_eq!(answered, 6);
    }
}
