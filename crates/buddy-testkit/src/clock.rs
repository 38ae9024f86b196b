//! A clock whose waits pass at once, for tests of turns in which buddy waits (its checks
//! of a pollable tool): the turn does what it would do, without the time.

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{BoxFuture, WaitClock};

/// Every wait on it is over at once.
pub struct NoWait;

impl WaitClock for NoWait {
    fn sleep(&self, _duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::task::yield_now())
    }
}

/// [`NoWait`], ready for `TurnRequest::with_clock`.
pub fn no_wait() -> Option<Arc<dyn WaitClock>> {
    Some(Arc::new(NoWait))
}
