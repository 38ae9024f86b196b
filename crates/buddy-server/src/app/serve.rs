//! Running the server: listen, refuse unsafe setups, bound what each connection may
//! hold, and shut down in bounded time whatever the clients do.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::app;
use crate::conn::{self, ConnTable, Limits};
use crate::metrics;
use crate::state::AppState;

/// The server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "refusing to listen on {0} without auth: set api keys (--api-key, BUDDY_API_KEYS or [server] api_keys_env) or listen on 127.0.0.1"
    )]
    Unprotected(std::net::SocketAddr),
    /// A `cors_origins` entry that is no web origin.
    #[error("{0}")]
    Cors(String),
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
}

/// How long connections get to finish after the turns' grace period, before they are
/// dropped.
const CLOSE_MARGIN: Duration = Duration::from_secs(2);

/// Serves on `listener` until `shutdown` resolves; then stops accepting, lets running
/// turns finish for the grace period, cancels the rest, and returns once every turn
/// has been recorded and every connection closed (dropped, if a client holds one open).
pub async fn serve(
    state: AppState,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let addr = listener.local_addr()?;
    let settings = state.inner.settings.clone();
    if !addr.ip().is_loopback() && settings.api_keys.is_empty() {
        return Err(ServeError::Unprotected(addr));
    }
    crate::cors::origins(&settings.cors_origins).map_err(ServeError::Cors)?;
    metrics::handle();
    tracing::info!(%addr, auth = !settings.api_keys.is_empty(), "buddy serving");
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // Covers a slow request head and an idle kept-alive connection alike.
        .header_read_timeout(settings.header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(settings.header_timeout)
        .keep_alive_timeout(settings.header_timeout);
    let closing = CancellationToken::new();
    let shared = Arc::new(conn::Shared {
        builder,
        router: app(state.clone()),
        keys: settings.api_keys.clone().into(),
        header_timeout: settings.header_timeout,
        closing: closing.clone(),
    });
    let table = ConnTable::new(Limits {
        max: settings.max_connections,
        per_address: settings.max_connections_per_address,
        readers_per_key: settings.max_readers_per_key,
        websockets_per_key: settings.max_websockets_per_key,
        trusted: settings.trusted_proxies.clone(),
    });
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Events go out as they happen, in small writes: without this, Nagle's algorithm
        // holds each one back until the client's delayed ACK (40 ms on Linux).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
        while connections.try_join_next().is_some() {}
        match table.admit(peer.ip()) {
            Ok((place, shed)) => {
                if let Some(shed) = shed {
                    metrics::shed(shed);
                }
                connections.spawn(conn::serve_one(
                    Arc::clone(&shared),
                    stream,
                    place,
                    peer.ip(),
                ));
            }
            Err(why) => {
                metrics::shed(why);
                tracing::debug!(%peer, reason = why.as_str(), "connection not admitted");
                connections.spawn(conn::refuse(stream, why));
            }
        }
    }
    drop(listener);
    let grace = settings.shutdown_grace;
    tracing::info!(
        grace_secs = grace.as_secs_f64(),
        running = state.inner.turns.len(),
        connections = table.len(),
        "shutting down: no new connections; running turns may finish"
    );
    state.inner.turns.close();
    closing.cancel();
    if tokio::time::timeout(grace, state.wait_for_turns())
        .await
        .is_err()
    {
        tracing::warn!("grace period over: cancelling the turns still running");
        state.cancel_all();
        let _ = tokio::time::timeout(CLOSE_MARGIN, state.wait_for_turns()).await;
    }
    // Streams of finished turns end by themselves; a client that holds a connection
    // open past this margin is dropped.
    if tokio::time::timeout(CLOSE_MARGIN, async {
        while connections.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        tracing::warn!(left = connections.len(), "dropping connections still open");
        connections.shutdown().await;
    }
    tracing::info!("stopped");
    Ok(())
}
