//! One timer per model call for its first-byte, idle and whole-call limits.
//!
//! A tokio timer set per read (`tokio::time::timeout` around each chunk) takes the timer
//! wheel's lock twice per chunk, and when the runtime's threads are parked it wakes the
//! one holding the timer driver so it can shorten its sleep: two context switches per
//! chunk, which on a small VM cost more CPU than the HTTP client itself. Here the limits
//! are plain instants the caller moves forward as bytes arrive; the one timer is set
//! when the call starts, never later than the earliest limit could fall, and is only
//! set again when it fires before a limit is reached, which a healthy call never sees.
//! Even that one timer would wake the driver's thread per call; an endpoint's [`Keeper`]
//! keeps an earlier timer pending so it does not.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::Poll;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// How soon after a call starts its timer can first fire: the shortest of its limits.
fn first_due(first_byte: Duration, idle: Duration, call: Duration) -> Duration {
    first_byte.min(idle).min(call)
}

/// A model call's one timer.
pub(crate) struct Watchdog {
    sleep: Pin<Box<Sleep>>,
}

impl Watchdog {
    /// A timer for a call started now: it fires no later than the first of its limits
    /// could fall (`first_byte`, `idle` or the whole call's `call`, whichever is shortest).
    pub(crate) fn start(first_byte: Duration, idle: Duration, call: Duration) -> Self {
        let first = Instant::now() + first_due(first_byte, idle, call);
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

/// Keeps the runtime's timer driver waking at least every `period`. tokio wakes the thread
/// parked on the timer driver whenever a new timer falls due before the driver's next
/// wake-up; with no other timer pending that is every call's watchdog — a cross-thread
/// wake-up (an eventfd write and a context switch) per model call. With a timer of its
/// own always due within `period`, a watchdog due later never wakes anyone. One per
/// endpoint, started on the first call's runtime; it ends with the endpoint.
#[derive(Debug)]
pub(crate) struct Keeper {
    period: Duration,
    task: OnceLock<tokio::task::AbortHandle>,
}

impl Keeper {
    /// A keeper for calls with these limits (as given to [`Watchdog::start`]): it wakes
    /// every half of the time their first timer falls after they start (between 1 s and
    /// 30 s; a shorter limit still works, it just wakes the driver as before).
    pub(crate) fn new(first_byte: Duration, idle: Duration, call: Duration) -> Self {
        let shortest = first_due(first_byte, idle, call);
        Keeper {
            period: (shortest / 2).clamp(Duration::from_secs(1), Duration::from_secs(30)),
            task: OnceLock::new(),
        }
    }

    /// Starts the keeper on the current runtime, the first time only.
    pub(crate) fn ensure(&self) {
        let period = self.period;
        self.task.get_or_init(|| {
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(period).await;
                }
            })
            .abort_handle()
        });
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        if let Some(task) = self.task.get() {
            task.abort();
        }
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

    #[tokio::test]
    async fn the_keeper_wakes_within_half_the_shortest_limit_starts_once_and_ends_with_its_endpoint()
     {
        let secs = Duration::from_secs;
        let period = |first_byte, idle, call| Keeper::new(first_byte, idle, call).period;
        assert_eq!(period(secs(120), secs(60), secs(600)), secs(30));
        assert_eq!(period(secs(120), secs(60), secs(10)), secs(5));
        assert_eq!(period(secs(600), secs(600), secs(600)), secs(30));
        assert_eq!(
            period(Duration::from_millis(100), secs(60), secs(600)),
            secs(1)
        );

        let keeper = Keeper::new(secs(120), secs(60), secs(600));
        assert!(
            keeper.task.get().is_none(),
            "nothing runs before the first call"
        );
        keeper.ensure();
        let task = keeper
            .task
            .get()
            .cloned()
            .expect("started by the first call");
        keeper.ensure();
        assert!(
            keeper
                .task
                .get()
                .is_some_and(|again| again.id() == task.id())
        );
        assert!(!task.is_finished());
        drop(keeper);
        for _ in 0..100 {
            if task.is_finished() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(task.is_finished(), "the keeper ends with its endpoint");
    }
}
