//! The signals commands listen for: Ctrl-C (cancels a turn at the terminal) and, for
//! `serve`, SIGTERM too.

use anyhow::Context;

/// Ctrl-C, listened for from the moment this is called: a handler registered lazily (on
/// first poll) would let an early Ctrl-C kill the process instead of cancelling the turn.
pub fn interrupt() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        let mut signal = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .context("cannot listen for Ctrl-C")?;
        Ok(async move {
            signal.recv().await;
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}

/// SIGTERM or Ctrl-C, both listened for from the start.
pub fn shutdown() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    let ctrl_c = interrupt()?;
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot listen for SIGTERM")?;
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
        #[cfg(not(unix))]
        ctrl_c.await;
    })
}
