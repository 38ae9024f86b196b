//! A running call's progress as `tool_progress` events: what the call reports (an MCP
//! server's progress notifications, the status of its task) is merged into the call's
//! latest state and passed on at most every [`MIN_GAP`] — a server may send thousands —
//! and the state not yet passed on is always sent when the call ends, before its result.
//! The events are not part of the history and the loop guards never see them.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use buddy_core::{ChatEvent, Progress, ProgressSink, ToolCall};
use tokio::sync::{Notify, mpsc};

/// The shortest time between two `tool_progress` events of one call (4 a second).
pub(crate) const MIN_GAP: Duration = Duration::from_millis(250);

/// One call's progress: the latest state and whether it changed since last passed on.
#[derive(Debug, Default)]
struct Latest {
    state: Progress,
    unsent: bool,
}

/// The sink handed to one call; [`follow`] reads what it gathers.
#[derive(Debug, Default)]
pub(crate) struct CallProgress {
    latest: Mutex<Latest>,
    changed: Notify,
}

impl CallProgress {
    fn lock(&self) -> std::sync::MutexGuard<'_, Latest> {
        // Each change is one assignment: a panic elsewhere leaves a usable state.
        self.latest.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state to pass on, if it changed since last taken.
    fn take(&self) -> Option<Progress> {
        let mut latest = self.lock();
        std::mem::take(&mut latest.unsent).then(|| latest.state.clone())
    }
}

impl ProgressSink for CallProgress {
    fn report(&self, update: Progress) {
        {
            let mut latest = self.lock();
            let state = std::mem::take(&mut latest.state);
            latest.state = state.merged(update);
            latest.unsent = true;
        }
        self.changed.notify_one();
    }
}

fn event(call: &ToolCall, state: Progress) -> ChatEvent {
    ChatEvent::ToolProgress {
        id: call.id.clone(),
        name: call.name.clone(),
        progress: state.progress,
        total: state.total,
        message: state.message,
        status: state.status,
    }
}

/// Runs `work` (the call) while passing what `sink` gathers on to `events` as
/// `tool_progress` events of `call`, at most one every [`MIN_GAP`]; what is still unsent
/// when `work` ends goes out before this returns.
pub(crate) async fn follow<T>(
    call: &ToolCall,
    sink: Arc<CallProgress>,
    events: mpsc::Sender<ChatEvent>,
    work: impl Future<Output = T>,
) -> T {
    tokio::pin!(work);
    let mut next_allowed = tokio::time::Instant::now();
    let out = loop {
        tokio::select! {
            biased;
            out = &mut work => break out,
            _ = sink.changed.notified() => {
                // Wait for this call's next slot, still driving the call.
                tokio::select! {
                    biased;
                    out = &mut work => break out,
                    _ = tokio::time::sleep_until(next_allowed) => {}
                }
                if let Some(state) = sink.take() {
                    let _ = events.send(event(call, state)).await;
                    next_allowed = tokio::time::Instant::now() + MIN_GAP;
                }
            }
        }
    };
    if let Some(state) = sink.take() {
        let _ = events.send(event(call, state)).await;
    }
    out
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
        while let Ok(ChatEvent::ToolProgress {
            id,
            progress,
            status,
            ..
        }) = rx.try_recv()
        {
            assert_eq!(id, "c1");
            seen.push((progress, status));
        }
        seen
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_is_coalesced_to_four_a_second_and_the_last_always_arrives() {
        let call = ToolCall::new("c1", "export", "{}");
        let sink = Arc::new(CallProgress::default());
        let (tx, mut rx) = mpsc::channel(4096);
        let reporter = Arc::clone(&sink);
        // 1000 updates over 2 s (one every 2 ms), then the status of the task, then the
        // result.
        let work = async move {
            for n in 1..=1000 {
                reporter.report(step(n));
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            reporter.report(Progress {
                status: Some("completed".into()),
                ..Progress::default()
            });
            "done"
        };
        let out = follow(&call, sink, tx, work).await;
        assert_eq!(out, "done");
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
            "the last state, merged, before the call's end"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn updates_far_apart_each_get_an_event_and_a_quiet_call_none() {
        let call = ToolCall::new("c1", "export", "{}");
        let sink = Arc::new(CallProgress::default());
        let (tx, mut rx) = mpsc::channel(64);
        let reporter = Arc::clone(&sink);
        follow(&call, sink, tx.clone(), async move {
            for n in 1..=3 {
                reporter.report(step(n));
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
        .await;
        let values: Vec<Option<f64>> = drained(&mut rx).into_iter().map(|(p, _)| p).collect();
        assert_eq!(values, [Some(1.0), Some(2.0), Some(3.0)]);

        let quiet = Arc::new(CallProgress::default());
        follow(&call, quiet, tx, async {
            tokio::time::sleep(Duration::from_secs(1)).await
        })
        .await;
        assert!(drained(&mut rx).is_empty());
    }
}
