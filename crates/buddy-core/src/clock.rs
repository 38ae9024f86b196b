//! Where buddy's own waits happen (the pauses between its checks of a pollable tool):
//! real time by default, or a scripted scenario's simulated clock, so a job that takes
//! minutes can be run, tested and benchmarked in no time.

use std::time::Duration;

use crate::BoxFuture;

/// A clock buddy waits on.
pub trait WaitClock: Send + Sync {
    /// Resolves once `duration` has passed on this clock.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}
