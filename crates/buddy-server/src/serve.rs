//! Running the server: listen, refuse unsafe setups, shut down gracefully.

use std::future::Future;
use std::time::Duration;

use tokio::net::TcpListener;

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

/// Serves on `listener` until `shutdown` resolves; then stops accepting, lets running
/// turns finish for the grace period, cancels the rest, and returns once every turn
/// has been recorded.
pub async fn serve(
    state: AppState,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() && state.inner.settings.api_keys.is_empty() {
        return Err(ServeError::Unprotected(addr));
    }
    metrics::handle();
    tracing::info!(%addr, auth = !state.inner.settings.api_keys.is_empty(), "buddy serving");
    let grace = state.inner.settings.shutdown_grace;
    let on_signal = state.clone();
    axum::serve(listener, app(state.clone()))
        .with_graceful_shutdown(async move {
            shutdown.await;
            tracing::info!(
                grace_secs = grace.as_secs_f64(),
                "shutting down: running turns may finish"
            );
            on_signal.inner.turns.close();
            let later = on_signal.clone();
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                tracing::warn!("grace period over: cancelling the turns still running");
                later.cancel_all();
            });
        })
        .await?;
    // Bounded: turns were cancelled after the grace period at the latest.
    let _ = tokio::time::timeout(grace + Duration::from_secs(10), state.wait_for_turns()).await;
    tracing::info!("stopped");
    Ok(())
}
