//! Watching a turn that runs on its own, from any point: a log of this process read from
//! memory, or, with several instances on one PostgreSQL, the events another instance
//! keeps in the database. Used by `GET /v1/turns/{id}/events` and by the Responses
//! API's `retrieve(stream=True)`.

use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::body::Bytes;
use axum::http::HeaderMap;
use buddy_store::{Coordinator, StoredEvent};
use futures::Stream;
use serde_json::json;

use super::encoder::Encoder;
use crate::caller::Caller;
use crate::conn::Progress;
use crate::error::AppError;
use crate::sse;
use crate::state::AppState;
use crate::turn_log::LogItem;

/// How often a watcher of another instance's turn looks for new events.
const POLL: Duration = Duration::from_millis(150);
/// How long a running turn of another instance may take to write its first events.
const FIRST_EVENTS_WITHIN: Duration = Duration::from_secs(5);
/// How long the instance keeping a log that is not running (it ended there, within its
/// grace period) may take to copy it when asked; past it, no instance has it.
const COPIED_WITHIN: Duration = Duration::from_secs(1);
/// Events read from the database at once.
pub(crate) const PAGE: usize = 500;
/// How long a turn may be gone from every instance, its log unfinished, before a
/// watcher says it was interrupted (its instance died).
const GONE_AFTER: Duration = Duration::from_secs(10);

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

/// A reader's request, as the connection table follows it (absent when the router is
/// driven without `serve`, as in-process tests and embedding apps do).
pub(crate) type Reader = Option<Extension<Arc<Progress>>>;

/// Counts a reader of a running turn against its key's cap (429 past it) and lets the
/// connection table shed it like an idle connection when room is needed.
pub(crate) fn register_reader(reader: &Reader, caller: &Caller) -> Result<(), AppError> {
    match reader {
        Some(Extension(progress)) => progress.watch(&caller.owner),
        None => Ok(()),
    }
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

/// The native encoder: each log item as a numbered SSE frame (its number is the `id:`
/// a client reattaches from), a gap as a `gap` event saying how many were missed, after
/// an optional opening frame. Any log reads this way: a turn's events, a response's own.
#[derive(Default)]
pub(crate) struct Numbered {
    pub opening: Option<Bytes>,
}

impl<T: LogItem> Encoder<T> for Numbered {
    type Frame = Bytes;

    fn opening(&mut self) -> Vec<Bytes> {
        self.opening.take().into_iter().collect()
    }

    fn encode(&mut self, seq: u64, item: &T) -> Vec<Bytes> {
        vec![item.numbered_frame(seq)]
    }

    fn gap(&mut self, missed: u64) -> Vec<Bytes> {
        vec![sse::json_frame(Some("gap"), &json!({"missed": missed}))]
    }
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
    // Events are copied into the database only when asked for: the instance keeping
    // this log copies it from its first event. A turn just started elsewhere may not
    // have written its first events yet.
    coordinator.ask_for_events(log_id).await?;
    let mut waited = Duration::ZERO;
    let first = loop {
        if let Some(kept) = coordinator.events_after(log_id, after, PAGE).await? {
            break kept;
        }
        if waited >= FIRST_EVENTS_WITHIN
            || (waited >= COPIED_WITHIN && !coordinator.is_running(turn_id).await?)
        {
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
