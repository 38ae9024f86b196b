//! A response's own events (the API's, in its order, numbered as its
//! `sequence_number` + 1) in a log of their own, made from the turn's as it runs, so that
//! `GET /v1/responses/{id}?stream=true&starting_after=N` can pick the stream up again;
//! and their SSE form.

use std::sync::Arc;

use axum::body::Bytes;
use axum::response::Response;
use futures::StreamExt;

use super::builder::Builder;
use crate::sse;
use crate::state::AppState;
use crate::turn::{StartedTurn, frames};
use crate::turn_log::{EventLog, Frame};

/// Starts the log of `turn`'s response, which `builder` makes, on its own task.
pub(crate) fn response_log(
    state: &AppState,
    turn: StartedTurn,
    builder: Builder,
) -> Arc<EventLog<Frame>> {
    let log = EventLog::new(builder.id.clone(), builder.owner().to_owned());
    // Each lifecycle event repeats the response object, instructions and all: the log
    // holds them once.
    let mut shared: Vec<Arc<str>> = builder.instructions_json().into_iter().collect();
    if let Some(instructions) = shared.first() {
        log.hold_shared(instructions.len());
    }
    let kept = state.keep_log(&log);
    let into = Arc::clone(&log);
    let mut encoded = Box::pin(frames(turn.events, builder, None));
    state.inner.turns.spawn(async move {
        while let Some((name, data)) = encoded.next().await {
            // A call's large arguments recur in its item's events and in the response
            // object that ends the stream: the log holds them once.
            if let Some(arguments) = large_arguments(&data).filter(|a| !shared.contains(a)) {
                into.hold_shared(arguments.len());
                shared.push(arguments);
            }
            into.push(Frame::sharing_all(name, &data, &shared));
        }
        into.close();
        kept.ended().await;
    });
    log
}

/// Arguments shorter than this are not worth holding apart.
const SHARED_ARGUMENTS_FROM: usize = 64 * 1024;

/// The JSON text of the arguments of the item an event carries, when they are large.
fn large_arguments(data: &serde_json::Value) -> Option<Arc<str>> {
    let arguments = data.get("item")?.get("arguments")?.as_str()?;
    if arguments.len() < SHARED_ARGUMENTS_FROM {
        return None;
    }
    let json = buddy_core::json_exact(&arguments, 0).ok()?;
    String::from_utf8(json).ok().map(Arc::from)
}

/// The streamed form of a response's frames, ending with `[DONE]` as the Open Responses
/// specification asks.
pub(crate) fn stream(frames: impl futures::Stream<Item = Bytes> + Send + 'static) -> Response {
    let done = futures::stream::once(async { sse::text_frame(None, "[DONE]") });
    sse::respond(frames.chain(done))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn_log::LogItem;

    #[test]
    fn large_arguments_are_held_once_by_the_frames_that_carry_them() {
        let arguments = format!("{{\"text\":\"{}\"}}", "a\n".repeat(40_000));
        let item = serde_json::json!({"type": "mcp_call", "arguments": arguments});
        let done = serde_json::json!({"type": "response.output_item.done", "item": item});
        let completed = serde_json::json!({"type": "response.completed",
            "response": {"output": [item], "instructions": null}});
        let shared = large_arguments(&done).expect("large arguments are shared");
        assert_eq!(&*shared, serde_json::to_string(&arguments).unwrap());
        assert_eq!(
            large_arguments(&completed),
            None,
            "found in an item's events"
        );
        let frames: Vec<Frame> = [("response.output_item.done", &done), ("x", &completed)]
            .into_iter()
            .map(|(name, data)| Frame::sharing_all(name.into(), data, &[Arc::clone(&shared)]))
            .collect();
        assert_eq!(Arc::strong_count(&shared), 3, "two frames, one copy");
        for (frame, data) in frames.iter().zip([&done, &completed]) {
            assert_eq!(frame.json(), data.to_string(), "the wire text is unchanged");
            assert!(frame.size() < 200, "{}", frame.size());
            let whole = sse::numbered_frame(3, frame.name(), &frame.json());
            assert_eq!(frame.numbered_frame(3), whole);
        }
        let small = serde_json::json!({"item": {"arguments": "{}"}});
        assert_eq!(large_arguments(&small), None);
    }
}
