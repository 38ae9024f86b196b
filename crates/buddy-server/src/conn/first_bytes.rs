//! A connection's first bytes: enough of them to tell HTTP/1 from HTTP/2, so telling
//! the two apart never waits on a client that sends nothing (or half the HTTP/2 preface).

use std::io;
use std::time::Duration;

use tokio::net::TcpStream;

/// What an HTTP/2 client with prior knowledge sends first.
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How often a client that sent part of the HTTP/2 preface is looked at again.
const RECHECK: Duration = Duration::from_millis(10);

/// Waits, without reading anything, until the client has sent a byte that is not the
/// start of the HTTP/2 preface, or the whole preface. `false`: it closed first.
pub(crate) async fn first_bytes(stream: &TcpStream) -> io::Result<bool> {
    let mut buf = [0u8; 24];
    loop {
        let n = stream.peek(&mut buf).await?;
        let Some(seen) = buf.get(..n) else {
            return Ok(false);
        };
        if n == 0 {
            return Ok(false);
        }
        if n == H2_PREFACE.len() || !H2_PREFACE.starts_with(seen) {
            return Ok(true);
        }
        // Part of the preface: `peek` would answer at once with the same bytes.
        tokio::time::sleep(RECHECK).await;
    }
}
