//! One API family's stream: the [`Encoder`] each family implements to turn a log's
//! items into its frames, the one driver that runs it ([`frames`]), and the tracker of
//! calls started and not yet answered that the OpenAI families hand back.

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::response::Response;
use buddy_core::{ChatEvent, ToolCall};
use futures::Stream;
use tokio_util::sync::CancellationToken;

use crate::turn_log::{LogItem, Next, Watch};

/// An API family's translation of a log (a turn's `ChatEvent`s, or a response's own
/// frames) into the frames its clients read.
pub(crate) trait Encoder<T = ChatEvent>: Send + 'static {
    /// What the stream carries: SSE bytes, or frames kept in a log of their own.
    type Frame: Send + 'static;

    /// Frames before the log's first item.
    fn opening(&mut self) -> Vec<Self::Frame> {
        Vec::new()
    }

    /// Frames for item number `seq` of the log.
    fn encode(&mut self, seq: u64, item: &T) -> Vec<Self::Frame>;

    /// Frames for `missed` items the log dropped before this reader got to them
    /// (nothing, for an encoder that cannot say so).
    fn gap(&mut self, _missed: u64) -> Vec<Self::Frame> {
        Vec::new()
    }

    /// Frames after the log's last item.
    fn closing(&mut self) -> Vec<Self::Frame> {
        Vec::new()
    }
}

/// The frames `encoder` makes of what `watch` reads, in order, ending with the log;
/// `guard` is held until the stream is dropped.
pub(crate) fn frames<T: LogItem, E: Encoder<T>>(
    watch: Watch<T>,
    mut encoder: E,
    guard: Option<CancelOnDrop>,
) -> impl Stream<Item = E::Frame> + Send + 'static {
    let queued: VecDeque<E::Frame> = encoder.opening().into();
    let driving = Driving {
        watch,
        encoder,
        queued,
        done: false,
        _guard: guard,
    };
    futures::stream::unfold(driving, |mut s| async move {
        loop {
            if let Some(frame) = s.queued.pop_front() {
                return Some((frame, s));
            }
            if s.done {
                return None;
            }
            let frames = match s.watch.next().await {
                Some(Next::Event(seq, item)) => s.encoder.encode(seq, &item),
                Some(Next::Gap { missed }) => s.encoder.gap(missed),
                None => {
                    s.done = true;
                    s.encoder.closing()
                }
            };
            s.queued.extend(frames);
        }
    })
}

/// A stream being encoded.
struct Driving<T, E: Encoder<T>> {
    watch: Watch<T>,
    encoder: E,
    queued: VecDeque<E::Frame>,
    done: bool,
    _guard: Option<CancelOnDrop>,
}

/// Calls started and not answered yet: at a `client_tool_calls` stop, the ones to hand
/// back to the client.
#[derive(Default)]
pub(crate) struct PendingCalls(Vec<ToolCall>);

impl PendingCalls {
    /// Follows one turn event: a call started is pending until its result comes.
    pub(crate) fn track(&mut self, event: &ChatEvent) {
        match event {
            ChatEvent::ToolCallStart {
                id,
                name,
                arguments,
            } => self.started(ToolCall::new(id.clone(), name.clone(), arguments.clone())),
            ChatEvent::ToolCallResult { id, .. } => {
                self.answered(id);
            }
            _ => {}
        }
    }

    /// A call started.
    pub(crate) fn started(&mut self, call: ToolCall) {
        self.0.push(call);
    }

    /// The call `id` got its result: no longer pending.
    pub(crate) fn answered(&mut self, id: &str) -> Option<ToolCall> {
        let at = self.0.iter().position(|c| c.id == id)?;
        Some(self.0.remove(at))
    }

    /// Every pending call, in the order they started; none is pending after.
    pub(crate) fn take(&mut self) -> Vec<ToolCall> {
        std::mem::take(&mut self.0)
    }
}

/// Cancels a turn when dropped: the response stream holding it went away.
pub(crate) struct CancelOnDrop(pub CancellationToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Follows a turn to its end for a whole (not streamed) reply: its terminal event and the
/// calls it left pending for the client. Dropped before the end, it cancels the turn.
pub(crate) async fn until_end(
    mut events: Watch<ChatEvent>,
    cancel: CancellationToken,
) -> (Option<ChatEvent>, PendingCalls) {
    let guard = CancelOnDrop(cancel);
    let mut pending = PendingCalls::default();
    let mut terminal = None;
    while let Some(event) = events.recv().await {
        pending.track(&event);
        if event.is_terminal() {
            terminal = Some(event);
        }
    }
    drop(guard);
    (terminal, pending)
}

/// Seconds since the Unix epoch (the OpenAI APIs' `created` fields).
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Names the turn a streamed response watches (`buddy-turn-id`), so a client whose
/// stream broke can reattach at `GET /v1/turns/{id}/events`.
pub(crate) fn with_turn_header(mut response: Response, turn_id: &str) -> Response {
    if let Ok(value) = axum::http::HeaderValue::from_str(turn_id) {
        response.headers_mut().insert("buddy-turn-id", value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn_log::EventLog;
    use futures::StreamExt;

    /// Frames its items' kinds, its gaps and its two ends, so the order shows.
    struct Kinds;

    impl Encoder for Kinds {
        type Frame = String;
        fn opening(&mut self) -> Vec<String> {
            vec!["open".into()]
        }
        fn encode(&mut self, seq: u64, item: &ChatEvent) -> Vec<String> {
            vec![format!("{seq}:{}", item.kind())]
        }
        fn closing(&mut self) -> Vec<String> {
            vec!["close".into()]
        }
    }

    #[tokio::test]
    async fn the_driver_opens_encodes_each_item_in_order_then_closes() {
        let log = EventLog::new("turn_1".into(), "me".into());
        log.push(ChatEvent::TextDelta { text: "a".into() });
        let watched = frames(log.watch(0), Kinds, None);
        log.push(ChatEvent::TextDelta { text: "b".into() });
        log.close();
        let seen: Vec<String> = watched.collect().await;
        assert_eq!(seen, ["open", "1:text_delta", "2:text_delta", "close"]);
    }

    #[test]
    fn pending_calls_are_those_started_and_not_answered_in_order() {
        let start = |id: &str| ChatEvent::ToolCallStart {
            id: id.into(),
            name: "lookup".into(),
            arguments: "{}".into(),
        };
        let mut pending = PendingCalls::default();
        for event in [start("a"), start("b"), start("c")] {
            pending.track(&event);
        }
        assert_eq!(pending.answered("b").map(|c| c.id), Some("b".into()));
        assert_eq!(pending.answered("b"), None);
        let left: Vec<String> = pending.take().into_iter().map(|c| c.id).collect();
        assert_eq!(left, ["a", "c"]);
        assert!(pending.take().is_empty());
    }
}
