//! A tiny HTTP/1.1 server on 127.0.0.1 for provider tests: it plays scripted responses
//! piece by piece (with pauses, stalls or an abrupt close), records every request, and
//! notices when a client hangs up. It stops when dropped.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A request the server received.
#[derive(Clone, Debug)]
pub struct HttpRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// A header's value (names compare case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// One piece of a response body.
#[derive(Clone, Debug)]
pub enum Piece {
    Bytes(Vec<u8>),
    Pause(Duration),
    /// A fault: `bytes` sent `times` times with `pause` after each (a server that never
    /// stops, or keeps a stream alive with comments), generated as it goes.
    Repeat {
        bytes: Vec<u8>,
        times: usize,
        pause: Duration,
    },
}

/// How the response ends after its pieces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// A proper end of body.
    Complete,
    /// Send nothing more and keep the connection open until the client leaves (at most 30 s).
    Stall,
    /// Close the connection without ending the body.
    Drop,
}

/// A scripted response.
#[derive(Clone, Debug)]
pub struct MockResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub pieces: Vec<Piece>,
    pub end: End,
}

impl MockResponse {
    /// An SSE body sent in one piece.
    pub fn sse(body: impl Into<Vec<u8>>) -> Self {
        MockResponse {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            pieces: vec![Piece::Bytes(body.into())],
            end: End::Complete,
        }
    }

    /// An SSE body cut into pieces of `size` bytes with `pause` between them.
    pub fn sse_chunked(body: &[u8], size: usize, pause: Duration) -> Self {
        let mut response = MockResponse::sse(Vec::new());
        response.pieces = body
            .chunks(size.max(1))
            .flat_map(|c| [Piece::Bytes(c.to_vec()), Piece::Pause(pause)])
            .collect();
        response
    }

    /// A response with `status` and a body.
    pub fn status(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        MockResponse {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            pieces: vec![Piece::Bytes(body.into())],
            end: End::Complete,
        }
    }

    /// A JSON response.
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        MockResponse::status(status, "application/json", body.to_string())
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets how the body ends.
    pub fn ending(mut self, end: End) -> Self {
        self.end = end;
        self
    }
}

type Handler = dyn Fn(&HttpRequest, usize) -> MockResponse + Send + Sync;

/// A running mock server.
pub struct MockServer {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<HttpRequest>>>,
    hangups: Arc<AtomicUsize>,
    sent: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Largest request the server reads.
const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

impl MockServer {
    /// Starts a server answering request `n` (0-based) with `handler(request, n)`.
    pub async fn start(
        handler: impl Fn(&HttpRequest, usize) -> MockResponse + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let requests: Arc<Mutex<Vec<HttpRequest>>> = Arc::default();
        let hangups = Arc::new(AtomicUsize::new(0));
        let sent = Arc::new(AtomicUsize::new(0));
        let body_bytes = Arc::clone(&sent);
        let handler: Arc<Handler> = Arc::new(handler);
        let (log, gone) = (Arc::clone(&requests), Arc::clone(&hangups));
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (handler, log, gone, sent) = (
                    Arc::clone(&handler),
                    Arc::clone(&log),
                    Arc::clone(&gone),
                    Arc::clone(&body_bytes),
                );
                tokio::spawn(async move {
                    let _ = serve(socket, handler, log, gone, sent).await;
                });
            }
        });
        MockServer {
            addr,
            requests,
            hangups,
            sent,
            task,
        }
    }

    /// Always answers with `response`.
    pub async fn always(response: MockResponse) -> Self {
        MockServer::start(move |_, _| response.clone()).await
    }

    /// Answers the n-th request with `responses[n]` (the last one repeats).
    pub async fn sequence(responses: Vec<MockResponse>) -> Self {
        MockServer::start(move |_, n| responses[n.min(responses.len() - 1)].clone()).await
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<HttpRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Body bytes the server managed to send, over every response: a client that stops
    /// reading (and hangs up) at a bound keeps this near the bound.
    pub fn body_bytes_sent(&self) -> usize {
        self.sent.load(Ordering::SeqCst)
    }

    /// How many stalled responses saw their client hang up.
    pub fn hangups(&self) -> usize {
        self.hangups.load(Ordering::SeqCst)
    }
}

async fn read_request(socket: &mut TcpStream) -> std::io::Result<Option<HttpRequest>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = socket.read(&mut chunk).await?;
        if n == 0 || buf.len() > MAX_REQUEST_BYTES {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length.min(MAX_REQUEST_BYTES) {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(HttpRequest {
        method,
        path,
        headers,
        body,
    }))
}

async fn serve(
    mut socket: TcpStream,
    handler: Arc<Handler>,
    log: Arc<Mutex<Vec<HttpRequest>>>,
    gone: Arc<AtomicUsize>,
    sent: Arc<AtomicUsize>,
) -> std::io::Result<()> {
    let Some(request) = read_request(&mut socket).await? else {
        return Ok(());
    };
    let n = match log.lock() {
        Ok(mut log) => {
            log.push(request.clone());
            log.len() - 1
        }
        Err(_) => 0,
    };
    let response = handler(&request, n);
    let mut head = format!("HTTP/1.1 {} X\r\n", response.status);
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    socket.write_all(head.as_bytes()).await?;
    for piece in &response.pieces {
        match piece {
            Piece::Bytes(bytes) if !bytes.is_empty() => {
                write_chunk(&mut socket, bytes, &sent).await?
            }
            Piece::Bytes(_) => {}
            Piece::Pause(d) => tokio::time::sleep(*d).await,
            Piece::Repeat {
                bytes,
                times,
                pause,
            } => {
                for _ in 0..*times {
                    write_chunk(&mut socket, bytes, &sent).await?;
                    if !pause.is_zero() {
                        tokio::time::sleep(*pause).await;
                    }
                }
            }
        }
    }
    match response.end {
        End::Complete => {
            socket.write_all(b"0\r\n\r\n").await?;
            socket.flush().await?;
        }
        End::Drop => {}
        End::Stall => {
            let mut byte = [0u8; 1];
            let waited = tokio::time::timeout(Duration::from_secs(30), async {
                loop {
                    match socket.read(&mut byte).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
            })
            .await;
            if waited.is_ok() {
                gone.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    Ok(())
}

/// Writes one chunk of a chunked body and flushes it.
async fn write_chunk(
    socket: &mut TcpStream,
    bytes: &[u8],
    sent: &AtomicUsize,
) -> std::io::Result<()> {
    socket
        .write_all(format!("{:x}\r\n", bytes.len()).as_bytes())
        .await?;
    socket.write_all(bytes).await?;
    socket.write_all(b"\r\n").await?;
    socket.flush().await?;
    sent.fetch_add(bytes.len(), Ordering::SeqCst);
    Ok(())
}
