//! A running call's progress as `tool_progress` events: what the call reports (an MCP
//! server's progress notifications, the status of its task) is merged into the call's
//! latest state and passed on at most every [`MIN_GAP`] — a server may send thousands.
//! An update that comes sooner waits for a timer of its own; when the call ends the
//! driver [`CallProgress::finish`]es it, sending what is still unsent before the call's
//! result and nothing after. The call's future is not wrapped: a call that reports
//! nothing runs exactly as before. The events are not part of the history and the loop
//! guards never see them.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use buddy_core::{ChatEvent, Progress, ProgressSink, ToolCall};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::time::Instant;

/// The shortest time between two `tool_progress` events of one call (4 a second).
pub(crate) const MIN_GAP: Duration = Duration::from_millis(250);

/// One call's progress so far.
#[derive(Debug, Default)]
struct Latest {
    state: Progress,
    /// The state changed since it was last sent.
    unsent: bool,
    last_sent: Option<Instant>,
    /// A timer will send the state.
    timer: bool,
    /// The call ended (or its stream is gone): nothing more is sent.
    closed: bool,
}

/// The sink handed to one call: sends its `tool_progress` events on the turn's stream.
#[derive(Debug)]
pub(crate) struct CallProgress {
    id: String,
    name: String,
    events: mpsc::Sender<ChatEvent>,
    latest: Mutex<Latest>,
    /// Itself, for the timers it starts.
    me: Weak<CallProgress>,
}

impl CallProgress {
    /// The sink of `call`, sending on `events`.
    pub(crate) fn new(call: &ToolCall, events: mpsc::Sender<ChatEvent>) -> Arc<Self> {
        Arc::new_cyclic(|me| CallProgress {
            id: call.id.clone(),
            name: call.name.clone(),
            events,
            latest: Mutex::default(),
            me: me.clone(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Latest> {
        // Each change is a few assignments: a panic elsewhere leaves a usable state.
        self.latest.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn event(&self, state: Progress) -> ChatEvent {
        ChatEvent::ToolProgress {
            id: self.id.clone(),
            name: self.name.clone(),
            progress: state.progress,
            total: state.total,
            message: state.message,
            status: state.status,
        }
    }

    /// Sends the unsent state now if its slot has come, else leaves it to a timer. Runs
    /// under the lock, so a send is queued before [`CallProgress::finish`] can close.
    fn pass_on(&self, latest: &mut Latest) {
        if latest.closed || !latest.unsent || latest.timer {
            return;
        }
        let now = Instant::now();
        let slot = latest.last_sent.map_or(now, |at| at + MIN_GAP);
        if slot <= now {
            match self.events.try_send(self.event(latest.state.clone())) {
                Ok(()) => {
                    latest.unsent = false;
                    latest.last_sent = Some(now);
                    return;
                }
                // The consumer is behind: try again a gap later.
                Err(TrySendError::Full(_)) => {}
                Err(TrySendError::Closed(_)) => {
                    latest.closed = true;
                    return;
                }
            }
        }
        let at = if slot <= now { now + MIN_GAP } else { slot };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        latest.timer = true;
        let me = self.me.clone();
        runtime.spawn(async move {
            tokio::time::sleep_until(at).await;
            if let Some(me) = me.upgrade() {
                let mut latest = me.lock();
                latest.timer = false;
                me.pass_on(&mut latest);
            }
        });
    }

    /// The call ended: what is still unsent goes out now (before the call's result,
    /// which the driver emits next), and nothing after.
    pub(crate) async fn finish(&self) {
        let last = {
            let mut latest = self.lock();
            let was_closed = std::mem::replace(&mut latest.closed, true);
            let unsent = std::mem::take(&mut latest.unsent);
            (unsent && !was_closed).then(|| latest.state.clone())
        };
        if let Some(state) = last {
            let _ = self.events.send(self.event(state)).await;
        }
    }
}

impl ProgressSink for CallProgress {
    fn report(&self, update: Progress) {
        let mut latest = self.lock();
        if latest.closed {
            return;
        }
        let state = std::mem::take(&mut latest.state);
        latest.state = state.merged(update);
        latest.unsent = true;
        self.pass_on(&mut latest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(n: u32) -> Progress {
        Progress {
            progress: Some(f64::from(n)),
            total: Some(1000.0),
            message: Some(format!("row {n}")),
            status: None,
        }
    }

    fn drained(rx: &mut mpsc::Receiver<ChatEvent>) -> Vec<(Option<f64>, Option<String>)> {
        let mut seen = Vec::new();
        while let Ok(event) = rx.try_recv() {
            let ChatEvent::ToolProgress {
                id,
                progress,
                status,
                ..
            } = event
            else {
                panic!("{event:?}")
            };
            assert_eq!(id, "c1");
            seen.push((progress, status));
        }
        seen
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_is_coalesced_to_four_a_second_and_the_last_always_arrives() {
        let call = ToolCall::new("c1", "export", "{}");
        let (tx, mut rx) = mpsc::channel(4096);
        let sink = CallProgress::new(&call, tx);
        // 1000 updates over 2 s (one every 2 ms), then the status of the task.
        for n in 1..=1000 {
            sink.report(step(n));
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        sink.report(Progress {
            status: Some("completed".into()),
            ..Progress::default()
        });
        sink.finish().await;
        // Late reports (a notification handled after the result) are dropped.
        sink.report(step(1001));
        tokio::time::sleep(MIN_GAP * 2).await;
        let seen = drained(&mut rx);
        // The first at once, then one per 250 ms of the 2 s, and the last at the end.
        assert!(
            (8..=10).contains(&seen.len()),
            "{} events: {seen:?}",
            seen.len()
        );
        let values: Vec<f64> = seen.iter().filter_map(|(p, _)| *p).collect();
        assert!(
            values.windows(2).all(|w| w[0] < w[1]),
            "in order: {values:?}"
        );
        assert_eq!(seen[0].0, Some(1.0), "the first update goes out at once");
        assert_eq!(
            seen.last(),
            Some(&(Some(1000.0), Some("completed".to_owned()))),
            "the last state, merged, at the call's end"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_update_too_soon_goes_out_when_its_slot_comes_without_the_call_ending() {
        let call = ToolCall::new("c1", "export", "{}");
        let (tx, mut rx) = mpsc::channel(64);
        let sink = CallProgress::new(&call, tx);
        sink.report(step(1));
        sink.report(step(2));
        assert_eq!(drained(&mut rx), [(Some(1.0), None)]);
        // The call goes quiet: the timer sends the second at its slot.
        tokio::time::sleep(MIN_GAP + Duration::from_millis(1)).await;
        assert_eq!(drained(&mut rx), [(Some(2.0), None)]);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(drained(&mut rx).is_empty(), "nothing new, nothing sent");
        sink.finish().await;
        assert!(drained(&mut rx).is_empty(), "all was sent already");

        let quiet = CallProgress::new(&call, mpsc::channel(1).0);
        quiet.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_consumer_that_is_behind_gets_the_latest_once_it_has_room() {
        let call = ToolCall::new("c1", "export", "{}");
        let (tx, mut rx) = mpsc::channel(1);
        // The stream is full: the update waits.
        tx.try_send(ChatEvent::TextDelta { text: "x".into() })
            .unwrap();
        let sink = CallProgress::new(&call, tx);
        sink.report(step(1));
        sink.report(step(2));
        assert!(matches!(rx.try_recv(), Ok(ChatEvent::TextDelta { .. })));
        tokio::time::sleep(MIN_GAP + Duration::from_millis(1)).await;
        assert_eq!(drained(&mut rx), [(Some(2.0), None)]);
    }
}
