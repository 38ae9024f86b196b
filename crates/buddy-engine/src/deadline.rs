//! The turn's deadline as something to wait on, beside the work it bounds.

use std::time::Instant;

/// Resolves when `deadline` passes; never, without one.
pub(crate) async fn passed(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
