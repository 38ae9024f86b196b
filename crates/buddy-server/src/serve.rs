//! Running the server: listen, refuse unsafe setups, bound what each connection may
//! hold, and shut down in bounded time whatever the clients do.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::app::app;
use crate::metrics;
use crate::state::AppState;

/// The server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "refusing to listen on {0} without auth: set api keys (--api-key, BUDDY_API_KEYS or [server] api_keys_env) or listen on 127.0.0.1"
    )]
    Unprotected(std::net::SocketAddr),
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
    metrics::handle();
    tracing::info!(%addr, auth = !settings.api_keys.is_empty(), "buddy serving");
    let router = app(state.clone());
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
    let builder = Arc::new(builder);
    let permits = Arc::new(Semaphore::new(settings.max_connections.max(1)));
    let closing = CancellationToken::new();
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        // A connection over the cap waits in the listen queue, not in memory here.
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, _) = tokio::select! {
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
        while connections.try_join_next().is_some() {}
        let (builder, service, closing) = (
            Arc::clone(&builder),
            TowerToHyperService::new(router.clone()),
            closing.clone(),
        );
        connections.spawn(async move {
            let _permit = permit;
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = closing.cancelled() => {
                    // Finish the request in flight, then close.
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    drop(listener);
    let grace = settings.shutdown_grace;
    tracing::info!(
        grace_secs = grace.as_secs_f64(),
        running = state.inner.turns.len(),
        connections = connections.len(),
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
