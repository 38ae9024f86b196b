//! Keeping logs where reattaching clients find them: in memory for the grace period after
//! a turn ends, and, with several instances, copied into the database when a client of
//! another instance asks for one.

use std::sync::{Arc, Weak};
use std::time::Duration;

use buddy_store::StoredEvent;

use super::watch::PAGE;
use crate::state::{AppState, Inner};
use crate::turn_log::{EventLog, LogItem, Next};

/// How long a batch of events waits for more before it is written (a model reply's
/// events come in a burst): below `POLL`, so a watcher elsewhere is no further behind
/// than its own polling makes it, and one statement per burst instead of several. The
/// first batch (what the log held when it was asked for) and a log's end are written at
/// once.
const LINGER: Duration = Duration::from_millis(100);
/// Logs never finished (their instance died) are forgotten after this long.
const ABANDONED_AFTER: Duration = Duration::from_secs(24 * 3600);

impl AppState {
    /// Keeps a log where reattaching clients find it until [`KeptLog::ended`] and the
    /// grace period after; with several instances it is copied into the database once
    /// another instance asks for it ([`AppState::copy_logs_when_asked`]).
    pub(crate) fn keep_log<T: LogItem>(&self, log: &Arc<EventLog<T>>) -> KeptLog<T> {
        T::registry(&self.inner.logs).insert(log);
        KeptLog {
            state: self.clone(),
            log: Arc::clone(log),
        }
    }

    /// With several instances, copies the logs other instances ask for (a client there
    /// reattaches to a turn of this one), while the server runs: events are written to
    /// the database only for turns someone elsewhere watches.
    pub(crate) fn copy_logs_when_asked(&self) {
        let mut requests = self.inner.coordinator.event_requests();
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            while let Some(id) = requests.recv().await {
                let Some(inner) = weak.upgrade() else { return };
                let logs = &inner.logs;
                if let Some(log) = logs.get::<buddy_core::ChatEvent>(&id) {
                    copy_log(&inner, log);
                } else if let Some(log) = logs.get::<crate::turn_log::Frame>(&id) {
                    copy_log(&inner, log);
                }
            }
        });
    }
}

/// Copies a log's events into the database from its first (in batches: whatever arrived
/// within `LINGER` of a batch's first event), unless a copy is under way already; the
/// copy ends once the log's end is written.
fn copy_log<T: LogItem>(inner: &Inner, log: Arc<EventLog<T>>) {
    if !log.start_copy() {
        return;
    }
    let coordinator = Arc::clone(&inner.coordinator);
    let mut watch = log.watch(0);
    let id = log.id.clone();
    let owner = log.owner.clone();
    tokio::spawn(async move {
        let mut first_batch = true;
        loop {
            let first = watch.next().await;
            let mut batch = Vec::new();
            // A log that closed without a terminal event is marked ended all the same.
            let mut ended = first.is_none();
            // Adds an event to the batch; true when it is the log's last.
            let add = |next: Next<T>, batch: &mut Vec<StoredEvent>| {
                let Next::Event(seq, item) = next else {
                    return false;
                };
                batch.push(StoredEvent {
                    seq,
                    name: item.name().to_owned(),
                    data: item.json().into_owned(),
                });
                item.is_terminal()
            };
            if let Some(first) = first {
                ended |= add(first, &mut batch);
            }
            if !ended && !batch.is_empty() && !first_batch {
                tokio::time::sleep(LINGER).await;
            }
            first_batch = false;
            while batch.len() < PAGE {
                match watch.try_next() {
                    Some(next) => ended |= add(next, &mut batch),
                    None => break,
                }
            }
            if batch.is_empty() && !ended {
                // Only a gap (this copy fell a whole log's bound behind): nothing to write.
                continue;
            }
            let mut tries = 0;
            while let Err(e) = coordinator.append_events(&id, &owner, &batch, ended).await {
                tries += 1;
                if tries == 3 {
                    tracing::error!(log = %id, error = %e, "turn events not kept for other instances");
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100 * tries)).await;
            }
            if ended {
                return;
            }
        }
    });
}

/// A log kept for reattaching clients.
pub(crate) struct KeptLog<T> {
    state: AppState,
    log: Arc<EventLog<T>>,
}

impl<T: LogItem> KeptLog<T> {
    /// Once the log has ended: forgets it when the grace period has passed (a copy for
    /// another instance under way holds it until its end is written).
    pub(crate) async fn ended(self) {
        let inner = &self.state.inner;
        // Within the budget of ended logs: those that ended first go first (this one too,
        // when it alone is larger).
        let budget = inner.settings.retained_events_bytes;
        let bytes = self.log.bytes();
        let gone = match inner.ended_logs.lock() {
            Ok(mut ended) => ended.keep(T::kind(), &self.log.id, bytes, budget),
            Err(_) => Vec::new(),
        };
        for (kind, id) in gone {
            inner.logs.remove(kind, &id);
        }
        let weak = Arc::downgrade(inner);
        let grace = inner.settings.turn_events_grace;
        let id = self.log.id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            if let Some(inner) = weak.upgrade() {
                inner.logs.remove(T::kind(), &id);
                if let Ok(mut ended) = inner.ended_logs.lock() {
                    ended.forget(T::kind(), &id);
                }
            }
        });
    }
}

impl AppState {
    /// With several instances, forgets kept events whose grace period is over, every
    /// minute, while the server runs.
    pub(crate) fn prune_kept_events_every_minute(&self) {
        if self.inner.coordinator.shares_events() {
            tokio::spawn(prune_kept_events(Arc::downgrade(&self.inner)));
        }
    }
}

async fn prune_kept_events(inner: Weak<Inner>) {
    let mut every = tokio::time::interval(Duration::from_secs(60));
    loop {
        every.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        let grace = i64::try_from(inner.settings.turn_events_grace.as_millis()).unwrap_or(0);
        let abandoned = i64::try_from(ABANDONED_AFTER.as_millis()).unwrap_or(0);
        if let Err(e) = inner
            .coordinator
            .prune_events(now - grace, now - abandoned)
            .await
        {
            tracing::warn!(error = %e, "old turn events not pruned");
        }
    }
}
