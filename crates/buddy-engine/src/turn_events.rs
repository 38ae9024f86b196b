//! A turn driven by the task that reads its events, with no task of its own.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use buddy_core::ChatEvent;
use futures::Stream;
use tokio::sync::mpsc;

use crate::request::TurnOutcome;

/// The turn's future, boxed so the stream has one type.
type Running = Pin<Box<dyn Future<Output = TurnOutcome> + Send>>;

/// A turn's events as a [`Stream`] that runs the turn itself while it is read
/// ([`crate::Engine::events`]): the same events, in the same order, as
/// [`crate::Engine::spawn`]'s channel, without a task of the turn's own to wake for each
/// one — on a multi-threaded runtime a streamed reply wakes two tasks per event with
/// `spawn` (the turn, then its reader), one with this. The turn runs only while the
/// stream is polled: drop it to cancel the turn.
pub struct TurnEvents {
    running: Option<Running>,
    events: mpsc::Receiver<ChatEvent>,
    outcome: Option<TurnOutcome>,
}

impl TurnEvents {
    pub(crate) fn new(running: Running, events: mpsc::Receiver<ChatEvent>) -> Self {
        TurnEvents {
            running: Some(running),
            events,
            outcome: None,
        }
    }

    /// How the turn ended, once the stream has ended (`None` before, and after it was taken).
    pub fn outcome(&mut self) -> Option<TurnOutcome> {
        self.outcome.take()
    }
}

impl Stream for TurnEvents {
    type Item = ChatEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ChatEvent>> {
        let this = self.get_mut();
        // While the turn runs, the channel is read without registering this task's waker:
        // the turn is polled on this task, so an event it sends needs no wake-up (one
        // would make the runtime reschedule this task, and wake another worker, per event).
        loop {
            match this.events.try_recv() {
                Ok(event) => return Poll::Ready(Some(event)),
                Err(mpsc::error::TryRecvError::Disconnected) => return Poll::Ready(None),
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
            let Some(running) = this.running.as_mut() else {
                // The turn is over; the channel ends when its last sender (a sub-agent's
                // copy, perhaps) is gone.
                return this.events.poll_recv(cx);
            };
            match running.as_mut().poll(cx) {
                Poll::Ready(outcome) => {
                    this.outcome = Some(outcome);
                    this.running = None;
                }
                Poll::Pending => {
                    return match this.events.try_recv() {
                        Ok(event) => Poll::Ready(Some(event)),
                        // The turn holds a sender while it runs.
                        Err(_) => Poll::Pending,
                    };
                }
            }
        }
    }
}
