//! A scenario's simulated clock: buddy's waits on it pass at once, and a stub tool's
//! `timeline` reads it, so "a job that takes 120 s" runs in milliseconds, in tests,
//! benchmarks and `buddy run` alike.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use buddy_core::{BoxFuture, WaitClock};
use serde::{Deserialize, Serialize};

/// Which clock a scenario's waits and timelines run on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockKind {
    /// Real time.
    #[default]
    Real,
    /// Simulated: buddy's waits move the clock forward at once.
    Simulated,
}

/// Simulated time shared by a scenario's stubs and its turns (clones share it).
#[derive(Clone, Debug, Default)]
pub struct SimClock {
    elapsed_ms: Arc<AtomicU64>,
}

impl SimClock {
    /// Simulated time since the clock was made.
    pub fn elapsed(&self) -> Duration {
        Duration::from_millis(self.elapsed_ms.load(Ordering::SeqCst))
    }
}

/// Every clock equals every other: a scenario is compared by what its file says.
impl PartialEq for SimClock {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl WaitClock for SimClock {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        self.elapsed_ms.fetch_add(ms, Ordering::SeqCst);
        // Time passes at once; the task still yields, as a real wait would.
        Box::pin(tokio::task::yield_now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_pass_at_once_and_clones_share_the_time() {
        let clock = SimClock::default();
        let shared = clock.clone();
        let started = std::time::Instant::now();
        clock.sleep(Duration::from_secs(120)).await;
        assert_eq!(shared.elapsed(), Duration::from_secs(120));
        assert!(started.elapsed() < Duration::from_secs(60), "no real wait");
    }
}
