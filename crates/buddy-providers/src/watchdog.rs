//! One timer per model call for its first-byte, idle and whole-call limits.
//!
//! A tokio timer set per read (`tokio::time::timeout` around each chunk) takes the timer
//! wheel's lock twice per chunk, and when the runtime's threads are parked it wakes the
//! one holding the timer driver so it can shorten its sleep: two context switches per
//! chunk, which on a small VM cost more CPU than the HTTP client itself. Here the limits
//! are plain instants the caller moves forward as bytes arrive; the one timer is set
//! when the call starts, never later than the earliest limit could fall, and is only
//! set again when it fires before a limit is reached, which a healthy call never sees.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// A model call's one timer.
pub(crate) struct Watchdog {
    sleep: Pin<Box<Sleep>>,
}

impl Watchdog {
    /// A timer for a call started now: it fires no later than the first of its limits
    /// could fall (`first_byte`, `idle` or the whole call's `call`, whichever is shortest).
    pub(crate) fn start(first_byte: Duration, idle: Duration, call: Duration) -> Self {
        let first = Instant::now() + first_byte.min(idle).min(call);
        Watchdog {
            sleep: Box::pin(tokio::time::sleep_until(first)),
        }
    }

    /// Runs `work` until it ends (`Some`) or the timer fires (`None`: check the limits,
    /// then [`rearm`](Self::rearm) or give up). `work` is polled first, so a result that is
    /// ready wins over a timer that fired at the same moment.
    pub(crate) async fn race<F: Future + Unpin>(&mut self, work: &mut F) -> Option<F::Output> {
        std::future::poll_fn(|cx| {
            if let Poll::Ready(out) = Pin::new(&mut *work).poll(cx) {
                return Poll::Ready(Some(out));
            }
            match self.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    /// After the timer fired early: wait again, until `at`.
    pub(crate) fn rearm(&mut self, at: Instant) {
        self.sleep.as_mut().reset(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_that_ends_first_wins_and_a_fired_timer_can_be_rearmed() {
        let ms = Duration::from_millis;
        let mut dog = Watchdog::start(ms(10_000), ms(20), ms(60_000));
        let mut quick = Box::pin(async { 7 });
        assert_eq!(dog.race(&mut quick).await, Some(7));
        // The shortest limit fires (a test bounded by it, not timed).
        let mut never = Box::pin(std::future::pending::<()>());
        assert_eq!(dog.race(&mut never).await, None);
        dog.rearm(Instant::now() + ms(20));
        assert_eq!(dog.race(&mut never).await, None);
        // Work ready at the moment the timer is due still wins.
        dog.rearm(Instant::now());
        let mut ready = Box::pin(async { 8 });
        assert_eq!(dog.race(&mut ready).await, Some(8));
    }
}
