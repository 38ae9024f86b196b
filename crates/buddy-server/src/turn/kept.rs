//! Keeping logs where reattaching clients find them: in memory for the grace period after
//! a turn ends, and, with several instances, copied into the database.

use std::sync::{Arc, Weak};
use std::time::Duration;

use buddy_store::StoredEvent;
use tokio::task::JoinHandle;

use super::watch::PAGE;
use crate::state::{AppState, Inner};
use crate::turn_log::{EventLog, LogItem, Next};

/// How long a batch of events waits for more before it is written (a model reply's
/// events come in a burst): below `POLL`, so a watcher elsewhere is no further behind
/// than its own polling makes it, and one statement per burst instead of several. A
/// log's end is written at once.
const LINGER: Duration = Duration::from_millis(100);
/// Logs never finished (their instance died) are forgotten after this long.
const ABANDONED_AFTER: Duration = Duration::from_secs(24 * 3600);

impl AppState {
    /// Keeps a log where reattaching clients find it (and, with several instances, in the
    /// database too) until [`KeptLog::ended`] and the grace period after.
    pub(crate) fn keep_log<T: LogItem>(&self, log: &Arc<EventLog<T>>) -> KeptLog<T> {
        T::registry(&self.inner.logs).insert(log);
        KeptLog {
            state: self.clone(),
            log: Arc::clone(log),
            persisting: self.persist_log(log),
        }
    }

    /// With several instances, copies a log's events into the database as they come
    /// (in batches: whatever arrived within `LINGER` of a batch's first event), so any instance
    /// can serve a reattaching client. The handle ends once the log's end is written.
    fn persist_log<T: LogItem>(&self, log: &Arc<EventLog<T>>) -> Option<JoinHandle<()>> {
        let coordinator = Arc::clone(&self.inner.coordinator);
        if !coordinator.shares_events() {
            return None;
        }
        let mut watch = log.watch(0);
        let id = log.id.clone();
        let owner = log.owner.clone();
        Some(tokio::spawn(async move {
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
                if !ended && !batch.is_empty() {
                    tokio::time::sleep(LINGER).await;
                }
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
        }))
    }
}

/// A log kept for reattaching clients.
pub(crate) struct KeptLog<T> {
    state: AppState,
    log: Arc<EventLog<T>>,
    persisting: Option<JoinHandle<()>>,
}

impl<T: LogItem> KeptLog<T> {
    /// Once the log has ended: waits until its end is in the database (with several
    /// instances), then forgets it when the grace period has passed.
    pub(crate) async fn ended(self) {
        if let Some(persisting) = self.persisting {
            let _ = persisting.await;
        }
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
