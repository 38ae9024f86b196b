//! A turn's events, numbered from 1 and kept while the turn runs and for a grace period
//! after, so that a client whose stream broke can reattach and receive exactly what it
//! missed, then the live events. The HTTP stream that started a turn is only one watcher
//! of its log; the turn does not depend on it.
//!
//! A log holds at most [`MAX_LOG_BYTES`] of events in memory; past that the oldest go,
//! and a watcher that had not read them is told how many it missed (a gap), never given
//! a wrong sequence.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use buddy_core::ChatEvent;
use serde_json::Value;
use tokio::sync::watch;

use crate::sse;

/// Bytes of events one log keeps in memory (about a long turn with large tool results).
pub(crate) const MAX_LOG_BYTES: usize = 32 * 1024 * 1024;

/// What a log can hold: a named event with a JSON form.
pub(crate) trait LogItem: Send + Sync + Sized + 'static {
    /// The SSE event name.
    fn name(&self) -> &str;
    /// Whether it ends its log.
    fn is_terminal(&self) -> bool;
    /// The JSON form, as sent and as stored.
    fn json(&self) -> Cow<'_, str>;
    /// Its numbered SSE frame: `id: SEQ`, the event's name, its JSON.
    fn numbered_frame(&self, seq: u64) -> Bytes {
        sse::numbered_frame(seq, self.name(), &self.json())
    }
    /// About the bytes it holds, for the log's bound.
    fn size(&self) -> usize;
    /// Where this process keeps logs of this kind.
    fn registry(logs: &Logs) -> &Registry<Self>;
    /// Which kind of log it is.
    fn kind() -> LogKind;
}

/// The kinds of log a process keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogKind {
    Turn,
    Response,
}

impl LogItem for ChatEvent {
    fn name(&self) -> &str {
        self.kind()
    }
    fn is_terminal(&self) -> bool {
        ChatEvent::is_terminal(self)
    }
    /// In a buffer of its size: a call's arguments can be megabytes.
    fn json(&self) -> Cow<'_, str> {
        let text = buddy_core::json_exact(self, 0).map(String::from_utf8);
        Cow::Owned(match text {
            Ok(Ok(text)) => text,
            _ => "{}".into(),
        })
    }
    /// Written straight into the frame, without a JSON text of its own first.
    fn numbered_frame(&self, seq: u64) -> Bytes {
        sse::numbered_json_frame(seq, self.name(), self)
    }
    /// Its text, not its JSON (counting that would serialise every event once more).
    fn size(&self) -> usize {
        const BASE: usize = 64;
        BASE + match self {
            ChatEvent::TextDelta { text } => text.len(),
            ChatEvent::ToolCallStart { arguments, .. } => arguments.as_str().len(),
            ChatEvent::ToolCallResult { content, .. } => content.len(),
            ChatEvent::Done { answer, .. } => answer.len(),
            ChatEvent::Error { message, .. } => message.len(),
            // A sub-agent's event: its own size, and its path.
            ChatEvent::Agent { path, event } => {
                event.size()
                    + path
                        .iter()
                        .map(|h| h.agent.len() + h.call_id.len())
                        .sum::<usize>()
            }
            _ => 256,
        }
    }
    fn registry(logs: &Logs) -> &Registry<Self> {
        &logs.turns
    }
    fn kind() -> LogKind {
        LogKind::Turn
    }
}

/// An event of another wire format (the Responses API's), its JSON written once. Text
/// that many of a log's frames repeat (a response's `instructions`, in each lifecycle
/// event's response object) is held once, shared, and written back in place.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    name: String,
    json: Vec<Piece>,
}

/// A run of a frame's JSON: its own, or text shared with the log's other frames.
#[derive(Clone, Debug)]
enum Piece {
    Own(Box<str>),
    Shared(Arc<str>),
}

/// Shared text shorter than this is not worth splitting a frame for.
const SHARE_FROM: usize = 1024;

impl Frame {
    /// A frame of `data`'s JSON, whose runs equal to `shared` (JSON text) point to it.
    #[cfg(test)]
    pub(crate) fn sharing(name: String, data: &Value, shared: Option<&Arc<str>>) -> Self {
        Self::sharing_all(name, data, shared.map_or(&[][..], std::slice::from_ref))
    }

    /// A frame of `data`'s JSON, whose runs equal to any of `shared` point to it.
    pub(crate) fn sharing_all(name: String, data: &Value, shared: &[Arc<str>]) -> Self {
        // In a buffer of its size (a growing one holds up to twice an item's arguments).
        let json = match buddy_core::json_exact(data, 0).map(String::from_utf8) {
            Ok(Ok(json)) => json,
            _ => data.to_string(),
        };
        let mut pieces = vec![Piece::Own(json.into_boxed_str())];
        for text in shared.iter().filter(|s| s.len() >= SHARE_FROM) {
            pieces = pieces.into_iter().flat_map(|p| p.split(text)).collect();
        }
        Frame { name, json: pieces }
    }
}

impl Piece {
    fn text(&self) -> &str {
        match self {
            Piece::Own(text) => text,
            Piece::Shared(text) => text,
        }
    }

    /// Its own text's runs equal to `shared` made to point to it.
    fn split(self, shared: &Arc<str>) -> Vec<Piece> {
        let Piece::Own(own) = &self else {
            return vec![self];
        };
        let found: Vec<usize> = own.match_indices(&**shared).map(|(at, _)| at).collect();
        if found.is_empty() {
            return vec![self];
        }
        let (mut pieces, mut from) = (Vec::new(), 0);
        for at in found {
            if at > from {
                pieces.push(Piece::Own(own[from..at].into()));
            }
            pieces.push(Piece::Shared(Arc::clone(shared)));
            from = at + shared.len();
        }
        if from < own.len() {
            pieces.push(Piece::Own(own[from..].into()));
        }
        pieces
    }
}

/// The Responses API's events that end a response.
const TERMINAL_FRAMES: [&str; 4] = [
    "response.completed",
    "response.failed",
    "response.incomplete",
    "response.cancelled",
];

impl LogItem for Frame {
    fn name(&self) -> &str {
        &self.name
    }
    fn is_terminal(&self) -> bool {
        TERMINAL_FRAMES.contains(&self.name.as_str())
    }
    fn json(&self) -> Cow<'_, str> {
        match self.json.as_slice() {
            [Piece::Own(whole)] => Cow::Borrowed(whole),
            pieces => Cow::Owned(pieces.iter().map(Piece::text).collect()),
        }
    }
    /// Written from its pieces, without joining them first.
    fn numbered_frame(&self, seq: u64) -> Bytes {
        let head = format!("id: {seq}\nevent: {}\ndata: ", self.name);
        let len: usize = self.json.iter().map(|p| p.text().len()).sum();
        let mut out = Vec::with_capacity(head.len() + len + 2);
        out.extend_from_slice(head.as_bytes());
        for piece in &self.json {
            out.extend_from_slice(piece.text().as_bytes());
        }
        out.extend_from_slice(b"\n\n");
        Bytes::from(out)
    }
    /// Its own text only: what it shares is counted once, by its log.
    fn size(&self) -> usize {
        let own = self.json.iter().map(|p| match p {
            Piece::Own(text) => text.len(),
            Piece::Shared(_) => 0,
        });
        self.name.len() + own.sum::<usize>()
    }
    fn registry(logs: &Logs) -> &Registry<Self> {
        &logs.responses
    }
    fn kind() -> LogKind {
        LogKind::Response
    }
}

/// The numbered events of one turn (or one response).
pub(crate) struct EventLog<T> {
    /// The turn's (or response's) id.
    pub id: String,
    /// The key identity the turn runs for: only it may watch.
    pub owner: String,
    state: Mutex<LogState<T>>,
    /// The number of the last event pushed, for watchers waiting on the next.
    last: watch::Sender<u64>,
    /// Its events are being copied for other instances (asked once, copied once).
    copying: std::sync::atomic::AtomicBool,
}

struct LogState<T> {
    /// The number of `entries[0]`.
    first: u64,
    entries: VecDeque<(Arc<T>, usize)>,
    bytes: usize,
    /// Bytes its items share (counted once, not per item).
    shared: usize,
    ended: bool,
}

/// What a watcher reads next.
pub(crate) enum Next<T> {
    /// Event number `seq`.
    Event(u64, Arc<T>),
    /// Events the log no longer holds (it outgrew [`MAX_LOG_BYTES`]).
    Gap { missed: u64 },
}

impl<T: LogItem> EventLog<T> {
    pub(crate) fn new(id: String, owner: String) -> Arc<Self> {
        Arc::new(EventLog {
            id,
            owner,
            state: Mutex::new(LogState {
                first: 1,
                entries: VecDeque::new(),
                bytes: 0,
                shared: 0,
                ended: false,
            }),
            last: watch::channel(0).0,
            copying: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// True the first time only: whoever gets it copies the log for other instances.
    pub(crate) fn start_copy(&self) -> bool {
        !self
            .copying
            .swap(true, std::sync::atomic::Ordering::Relaxed)
    }

    /// Adds an event and wakes its watchers; returns its number. A terminal event ends
    /// the log; nothing is added after it.
    pub(crate) fn push(&self, item: T) -> Option<u64> {
        let size = item.size();
        self.push_sized(item, size)
    }

    fn push_sized(&self, item: T, size: usize) -> Option<u64> {
        let terminal = item.is_terminal();
        let seq = {
            let mut state = self.state.lock().ok()?;
            if state.ended {
                return None;
            }
            state.entries.push_back((Arc::new(item), size));
            state.bytes += size;
            while state.bytes > MAX_LOG_BYTES && state.entries.len() > 1 {
                if let Some((_, gone)) = state.entries.pop_front() {
                    state.bytes -= gone;
                    state.first += 1;
                }
            }
            state.ended = terminal;
            state.first + state.entries.len() as u64 - 1
        };
        self.last.send_replace(seq);
        Some(seq)
    }

    /// Counts `bytes` of text its items share (see [`Frame::sharing`]) once.
    pub(crate) fn hold_shared(&self, bytes: usize) {
        if let Ok(mut state) = self.state.lock() {
            state.shared += bytes;
        }
    }

    /// The bytes it holds: its events and, once, what they share.
    pub(crate) fn bytes(&self) -> usize {
        self.state.lock().map_or(0, |s| s.bytes + s.shared)
    }

    /// Ends the log without a terminal event (its turn's task went away).
    pub(crate) fn close(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.ended = true;
        }
        self.last.send_modify(|_| {});
    }

    /// A watcher that reads the events numbered above `after`.
    pub(crate) fn watch(self: &Arc<Self>, after: u64) -> Watch<T> {
        Watch {
            log: Arc::clone(self),
            after,
            changed: self.last.subscribe(),
        }
    }
}

/// One reader of a log, at its own pace.
pub(crate) struct Watch<T> {
    log: Arc<EventLog<T>>,
    after: u64,
    changed: watch::Receiver<u64>,
}

impl<T: LogItem> Watch<T> {
    /// The next event, waiting for it; `None` once the log has ended and all is read.
    pub(crate) async fn next(&mut self) -> Option<Next<T>> {
        loop {
            // Marked seen before looking, so a push after the look always wakes us.
            self.changed.borrow_and_update();
            match self.now() {
                Ready::Item(next) => return Some(next),
                Ready::Ended => return None,
                Ready::Wait => {}
            }
            if self.changed.changed().await.is_err() {
                return match self.now() {
                    Ready::Item(next) => Some(next),
                    _ => None,
                };
            }
        }
    }

    /// The next event if it is already there.
    pub(crate) fn try_next(&mut self) -> Option<Next<T>> {
        match self.now() {
            Ready::Item(next) => Some(next),
            _ => None,
        }
    }

    /// The next event itself, skipping gaps: for endpoints that translate events.
    pub(crate) async fn recv(&mut self) -> Option<T>
    where
        T: Clone,
    {
        loop {
            match self.next().await? {
                Next::Event(_, item) => return Some(Arc::unwrap_or_clone(item)),
                Next::Gap { .. } => continue,
            }
        }
    }

    fn now(&mut self) -> Ready<T> {
        let Ok(state) = self.log.state.lock() else {
            return Ready::Ended;
        };
        // Saturating: `after` comes from a client, and `u64::MAX` is past every event,
        // not a wrap back to the first.
        let next = self.after.saturating_add(1);
        if next < state.first {
            let missed = state.first - next;
            self.after = state.first - 1;
            return Ready::Item(Next::Gap { missed });
        }
        let index = usize::try_from(next - state.first).unwrap_or(usize::MAX);
        match state.entries.get(index) {
            Some((item, _)) => {
                self.after += 1;
                Ready::Item(Next::Event(self.after, Arc::clone(item)))
            }
            None if state.ended => Ready::Ended,
            None => Ready::Wait,
        }
    }
}

enum Ready<T> {
    Item(Next<T>),
    Ended,
    Wait,
}

/// Logs of one kind by id.
pub(crate) struct Registry<T>(Mutex<HashMap<String, Arc<EventLog<T>>>>);

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Registry(Mutex::default())
    }
}

impl<T> Registry<T> {
    pub(crate) fn get(&self, id: &str) -> Option<Arc<EventLog<T>>> {
        self.0.lock().ok()?.get(id).cloned()
    }

    pub(crate) fn insert(&self, log: &Arc<EventLog<T>>) {
        if let Ok(mut logs) = self.0.lock() {
            logs.insert(log.id.clone(), Arc::clone(log));
        }
    }

    pub(crate) fn remove(&self, id: &str) {
        if let Ok(mut logs) = self.0.lock() {
            logs.remove(id);
        }
    }
}

/// The logs of this process's turns, and of responses, by id: running ones and those
/// that ended less than the grace period ago (within the byte budget of ended ones,
/// which `turn::kept` keeps).
#[derive(Default)]
pub(crate) struct Logs {
    turns: Registry<ChatEvent>,
    responses: Registry<Frame>,
}

impl Logs {
    /// The log of turn (or response) `id`, when this process has it.
    pub(crate) fn get<T: LogItem>(&self, id: &str) -> Option<Arc<EventLog<T>>> {
        T::registry(self).get(id)
    }

    /// Forgets log `id` of kind `kind`.
    pub(crate) fn remove(&self, kind: LogKind, id: &str) {
        match kind {
            LogKind::Turn => self.turns.remove(id),
            LogKind::Response => self.responses.remove(id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(text: &str) -> ChatEvent {
        ChatEvent::TextDelta { text: text.into() }
    }

    #[test]
    fn an_event_written_straight_into_its_frame_is_the_frame_of_its_json() {
        let call = ChatEvent::ToolCallStart {
            id: "call_1".into(),
            name: "count_bytes".into(),
            arguments: format!("{{\"text\":\"{}\\n\"}}", "é".repeat(70_000)).into(),
        };
        for event in [delta("a\"b"), call] {
            let json = event.json();
            assert_eq!(json, serde_json::to_string(&event).unwrap());
            assert_eq!(
                event.numbered_frame(7),
                sse::numbered_frame(7, event.name(), &json)
            );
        }
    }

    #[tokio::test]
    async fn watchers_read_every_event_once_in_order_from_where_they_ask() {
        let log = EventLog::new("turn_1".into(), "me".into());
        let mut early = log.watch(0);
        log.push(delta("a"));
        log.push(delta("b"));
        let mut late = log.watch(1);
        let reader = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(Next::Event(seq, event)) = early.next().await {
                seen.push((seq, event.kind().to_owned()));
            }
            seen
        });
        log.push(delta("c"));
        log.push(ChatEvent::Error {
            reason: buddy_core::StopReason::Cancelled,
            message: "x".into(),
            stats: Default::default(),
        });
        assert_eq!(log.push(delta("after the end")), None);
        let seen = reader.await.unwrap();
        assert_eq!(
            seen.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        assert_eq!(seen[3].1, "error");
        let mut from_late = Vec::new();
        while let Some(Next::Event(seq, _)) = late.next().await {
            from_late.push(seq);
        }
        assert_eq!(from_late, [2, 3, 4]);
    }

    #[tokio::test]
    async fn a_log_past_its_bound_drops_its_oldest_and_says_how_many_were_missed() {
        let log = EventLog::new("turn_2".into(), "me".into());
        let mut watcher = log.watch(0);
        for _ in 0..5 {
            log.push_sized(delta("x"), MAX_LOG_BYTES / 2);
        }
        match watcher.next().await {
            Some(Next::Gap { missed }) => assert_eq!(missed, 3),
            _ => panic!("expected a gap"),
        }
        match watcher.next().await {
            Some(Next::Event(seq, _)) => assert_eq!(seq, 4),
            _ => panic!("expected event 4"),
        }
        log.close();
        assert!(matches!(watcher.next().await, Some(Next::Event(5, _))));
        assert!(watcher.next().await.is_none());
    }

    #[test]
    fn a_frame_holds_shared_text_once_and_writes_it_back_in_place() {
        let instructions = "Be terse. ".repeat(10_000);
        let shared: Arc<str> = serde_json::to_string(&instructions).unwrap().into();
        let log: Arc<EventLog<Frame>> = EventLog::new("resp_1".into(), "me".into());
        log.hold_shared(shared.len());
        for name in [
            "response.created",
            "response.in_progress",
            "response.completed",
        ] {
            let data = serde_json::json!({"type": name, "response": {"id": "resp_1",
                "instructions": instructions, "output": []}});
            let frame = Frame::sharing(name.into(), &data, Some(&shared));
            assert_eq!(frame.json(), data.to_string(), "the wire text is unchanged");
            assert!(frame.size() < 200, "{}", frame.size());
            log.push(frame);
        }
        assert_eq!(Arc::strong_count(&shared), 4, "three frames, one copy");
        let bytes = log.bytes();
        assert!(
            (shared.len()..shared.len() + 600).contains(&bytes),
            "{bytes}"
        );
        // Short text is not split for.
        let small = Frame::sharing(
            "x".into(),
            &serde_json::json!({"a": "b"}),
            Some(&"\"b\"".into()),
        );
        assert!(matches!(small.json.as_slice(), [Piece::Own(_)]));
    }

    #[test]
    fn a_log_is_forgotten_by_its_kind_and_id() {
        let logs = Logs::default();
        let turn = EventLog::<ChatEvent>::new("same_id".into(), "me".into());
        let response = EventLog::<Frame>::new("same_id".into(), "me".into());
        logs.turns.insert(&turn);
        logs.responses.insert(&response);
        logs.remove(LogKind::Turn, "same_id");
        assert!(logs.get::<ChatEvent>("same_id").is_none());
        assert!(logs.get::<Frame>("same_id").is_some());
    }
}
