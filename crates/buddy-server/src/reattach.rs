//! Watching a turn that runs on its own: `GET /v1/turns/{id}/events?after=N` streams the
//! events numbered above `N` (or above the `Last-Event-ID` a reconnecting client sends),
//! then the live ones, until the turn's terminal event. A turn of this process is read
//! from its log in memory; with several instances on one PostgreSQL, a turn running on
//! another instance is read from the events that instance keeps in the database.

use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use buddy_core::ChatEvent;
use buddy_store::{Coordinator, StoredEvent};
use futures::Stream;
use serde::Deserialize;
use serde_json::json;
use tokio::task::JoinHandle;

use crate::auth::Caller;
use crate::error::AppError;
use crate::sse;
use crate::state::{AppState, Inner};
use crate::turn_log::{EventLog, LogItem, Next, Watch};
use crate::turns::CancelOnDrop;

/// How often a watcher of another instance's turn looks for new events.
const POLL: Duration = Duration::from_millis(150);
/// How long a running turn of another instance may take to write its first events.
const FIRST_EVENTS_WITHIN: Duration = Duration::from_secs(5);
/// How long a batch of events waits for more before it is written (a model reply's
/// events come in a burst): below `POLL`, so a watcher elsewhere is no further behind
/// than its own polling makes it, and one statement per burst instead of several. A
/// log's end is written at once.
const LINGER: Duration = Duration::from_millis(100);
/// Events read from the database at once.
const PAGE: usize = 500;
/// How long a turn may be gone from every instance, its log unfinished, before a
/// watcher says it was interrupted (its instance died).
const GONE_AFTER: Duration = Duration::from_secs(10);
/// Logs never finished (their instance died) are forgotten after this long.
const ABANDONED_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The query of `GET /v1/turns/{id}/events`.
#[derive(Deserialize)]
pub(crate) struct EventsQuery {
    after: Option<String>,
}

/// Where a reattaching client wants to start: after `Last-Event-ID`, else after `?after=`.
pub(crate) fn start_after(headers: &HeaderMap, after: Option<&str>) -> Result<u64, AppError> {
    let header = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty());
    match header.or(after) {
        None => Ok(0),
        Some(text) => text.trim().parse().map_err(|_| {
            AppError::BadRequest(format!(
                "`after` (or Last-Event-ID) must be an event number (0 for the start), not `{text}`"
            ))
        }),
    }
}

/// `GET /v1/turns/{id}/events`.
pub(crate) async fn events(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(query): Query<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let after = start_after(&headers, query.after.as_deref())?;
    if let Some(log) = state.inner.logs.get::<ChatEvent>(&id) {
        if !may_watch(&caller, &log.owner) {
            return Err(gone(&state, &id));
        }
        return Ok(sse::respond(log_frames(log.watch(after), None)));
    }
    let frames = remote_frames(&state, &caller, &id, &id, after).await?;
    Ok(sse::respond(frames))
}

/// Whether `caller` may watch a turn of `owner`.
pub(crate) fn may_watch(caller: &Caller, owner: &str) -> bool {
    caller.admin || caller.owner == owner
}

/// The error for a turn (or response) with no events to watch.
pub(crate) fn gone(state: &AppState, id: &str) -> AppError {
    AppError::NotFound(format!(
        "no events of `{id}`: it is not a turn of this key, or it ended more than {} s ago \
         (events are kept that long after a turn ends). Read its conversation instead: \
         GET /v1/conversations/{{id}}",
        state.inner.settings.turn_events_grace.as_secs()
    ))
}

/// A log's events as numbered SSE frames (a gap as a `gap` event saying how many were
/// missed); `guard` is held until the stream is dropped.
pub(crate) fn log_frames<T: LogItem>(
    watch: Watch<T>,
    guard: Option<CancelOnDrop>,
) -> impl Stream<Item = Bytes> + Send + 'static {
    futures::stream::unfold((watch, guard), |(mut watch, guard)| async move {
        let frame = match watch.next().await? {
            Next::Event(seq, item) => sse::numbered_frame(seq, item.name(), &item.json()),
            Next::Gap { missed } => sse::json_frame(Some("gap"), &json!({"missed": missed})),
        };
        Some((frame, (watch, guard)))
    })
}

/// The events of log `log_id` kept in the database by another instance, as frames, read
/// until the log ends; `turn_id` is the turn behind it (to notice one whose instance died).
pub(crate) async fn remote_frames(
    state: &AppState,
    caller: &Caller,
    log_id: &str,
    turn_id: &str,
    after: u64,
) -> Result<impl Stream<Item = Bytes> + Send + 'static, AppError> {
    let coordinator = Arc::clone(&state.inner.coordinator);
    if !coordinator.shares_events() {
        return Err(gone(state, log_id));
    }
    // A turn just started elsewhere may not have written its first events yet.
    let mut waited = Duration::ZERO;
    let first = loop {
        if let Some(kept) = coordinator.events_after(log_id, after, PAGE).await? {
            break kept;
        }
        if waited >= FIRST_EVENTS_WITHIN || !coordinator.is_running(turn_id).await? {
            return Err(gone(state, log_id));
        }
        tokio::time::sleep(POLL).await;
        waited += POLL;
    };
    if !may_watch(caller, &first.owner) {
        return Err(gone(state, log_id));
    }
    let remote = Remote {
        coordinator,
        log_id: log_id.to_owned(),
        turn_id: turn_id.to_owned(),
        after,
        queued: first.events.into(),
        ended: first.ended,
        gone_since: None,
        done: false,
    };
    Ok(futures::stream::unfold(remote, |mut remote| async move {
        let frame = remote.next().await?;
        Some((frame, remote))
    }))
}

/// A reader of a log another instance keeps.
struct Remote {
    coordinator: Arc<dyn Coordinator>,
    log_id: String,
    turn_id: String,
    after: u64,
    queued: std::collections::VecDeque<StoredEvent>,
    ended: bool,
    gone_since: Option<tokio::time::Instant>,
    done: bool,
}

impl Remote {
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if self.done {
                return None;
            }
            if let Some(event) = self.queued.pop_front() {
                self.after = event.seq;
                return Some(sse::numbered_frame(event.seq, &event.name, &event.data));
            }
            if self.ended {
                return None;
            }
            tokio::time::sleep(POLL).await;
            match self
                .coordinator
                .events_after(&self.log_id, self.after, PAGE)
                .await
            {
                Ok(Some(kept)) => {
                    self.ended = kept.ended;
                    if !kept.events.is_empty() {
                        self.gone_since = None;
                    }
                    self.queued.extend(kept.events);
                }
                Ok(None) => self.ended = true,
                Err(e) => {
                    tracing::warn!(log = %self.log_id, error = %e, "kept events unreadable; trying again")
                }
            }
            if !self.queued.is_empty() || self.ended {
                continue;
            }
            // Silent: is the turn still running anywhere?
            if let Ok(false) = self.coordinator.is_running(&self.turn_id).await {
                let since = *self
                    .gone_since
                    .get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= GONE_AFTER {
                    self.done = true;
                    return Some(sse::json_frame(
                        Some("interrupted"),
                        &json!({"message": format!(
                            "turn `{}` stopped without ending (the instance running it went away); \
                             read its conversation for what it stored", self.turn_id)}),
                    ));
                }
            }
        }
    }
}

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
        let weak = Arc::downgrade(&self.state.inner);
        let grace = self.state.inner.settings.turn_events_grace;
        let id = self.log.id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            if let Some(inner) = weak.upgrade() {
                T::registry(&inner.logs).remove(&id);
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
