//! Connection hygiene, as a reverse proxy would have it: a client gets `header_timeout`
//! to send its first byte and then its request head, and is closed after as long idle
//! between requests; a body has `body_timeout` in all (see `body.rs`); one address (the
//! forwarded one behind a trusted proxy) may hold only so many connections; and a full
//! table sheds the connection doing the least for anyone instead of keeping new clients
//! out (see `table.rs`) — readers of running turns and WebSocket sessions included.

mod first_bytes;
mod forwarded;
mod per_key;
mod session;
mod slot;
mod table;
mod track;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::settings::ApiKey;
pub(crate) use session::Session;
pub(crate) use slot::Shed;
pub(crate) use table::{Admitted, ConnTable, Limits};
pub(crate) use track::Progress;

/// What every connection of a server shares.
pub(crate) struct Shared {
    pub builder: Builder<TokioExecutor>,
    pub router: Router,
    pub keys: Arc<[ApiKey]>,
    /// For the first byte, and for idling between requests.
    pub header_timeout: Duration,
    /// Cancelled at shutdown: finish the request in flight, then close.
    pub closing: CancellationToken,
}

/// Serves one admitted connection until it closes, idles out, is shed or the server
/// shuts down.
pub(crate) async fn serve_one(
    shared: Arc<Shared>,
    stream: TcpStream,
    place: Admitted,
    peer: IpAddr,
) {
    let place = Arc::new(place);
    let slot = Arc::clone(place.slot());
    let work = async {
        match tokio::time::timeout(shared.header_timeout, first_bytes::first_bytes(&stream)).await {
            Ok(Ok(true)) => {}
            // Silent for too long, closed, or broken.
            _ => return,
        }
        let service = TowerToHyperService::new(track::Tracked::new(
            shared.router.clone(),
            Arc::clone(&place),
            Arc::clone(&shared.keys),
            peer,
        ));
        let connection = shared
            .builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service);
        tokio::pin!(connection);
        tokio::select! {
            _ = connection.as_mut() => {}
            () = idle_out(&slot, shared.header_timeout) => {}
            () = shared.closing.cancelled() => {
                connection.as_mut().graceful_shutdown();
                let _ = connection.await;
            }
        }
    };
    tokio::select! {
        () = work => {}
        () = slot.evicted() => {}
    }
    drop(place);
}

/// Resolves once the connection has had no request in flight for `limit` (an HTTP/2
/// client answering pings, or anything else that keeps a connection without using it).
async fn idle_out(slot: &slot::Slot, limit: Duration) {
    loop {
        match slot.idle_left(limit) {
            Some(left) if left.is_zero() => return,
            Some(left) => tokio::time::sleep(left).await,
            None => tokio::time::sleep(limit).await,
        }
    }
}

/// Tells a client that is not admitted why, if its socket takes the bytes at once, and
/// closes the connection.
pub(crate) async fn refuse(stream: TcpStream, why: Shed) {
    let body = refusal(why);
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = stream;
    let _ = stream.try_write(response.as_bytes());
    let _ = stream.shutdown().await;
}

/// The body of a 503 that says why a connection is not admitted.
fn refusal(why: Shed) -> &'static str {
    match why {
        Shed::AddressLimit => {
            r#"{"error":{"message":"too many connections from your address, all busy or with a key; close idle ones and retry","type":"rate_limit_error"}}"#
        }
        _ => {
            r#"{"error":{"message":"the server is at its connection limit; retry shortly","type":"overloaded_error"}}"#
        }
    }
}
