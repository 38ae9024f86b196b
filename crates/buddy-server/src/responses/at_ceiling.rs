//! A key at its spend ceiling asking for a response: an ordinary completed response whose
//! message says so (status `completed`, `buddy-stop-reason: cost_budget`), whole or
//! streamed — never a 429, which codex retries and then reports as a failure.

use axum::Json;
use axum::response::{IntoResponse, Response};
use buddy_core::{ChatEvent, StopReason, TurnStats};

use super::builder::Builder;
use super::ids::response_id;
use super::log::stream;
use crate::spend::AT_CEILING_ANSWER;
use crate::sse;
use crate::state::AppState;

/// The header a response's stop reason is named in.
const STOP_REASON_HEADER: &str = "buddy-stop-reason";

/// What the request is answered when its key is at its ceiling (`why`: the refusal).
pub(crate) fn at_ceiling(
    state: &AppState,
    owner: String,
    model: String,
    instructions: Option<String>,
    streamed: bool,
    why: &str,
) -> Response {
    let id = response_id(None, &buddy_store::new_id("turn"));
    let items = std::sync::Arc::clone(&state.inner.items);
    let mut builder = Builder::new(items, id, owner, model, instructions, None);
    let reason = StopReason::CostBudget;
    let answer = format!("{AT_CEILING_ANSWER}{why}");
    let mut events = builder.opening();
    events.extend(builder.on_event(ChatEvent::TextDelta {
        text: answer.clone(),
    }));
    events.extend(builder.on_event(ChatEvent::Done {
        reason,
        answer,
        stats: TurnStats::default(),
    }));
    let mut response = match streamed {
        true => {
            let frames = events
                .into_iter()
                .zip(1u64..)
                .map(|((name, data), seq)| sse::numbered_frame(seq, &name, &data.to_string()));
            stream(futures::stream::iter(frames.collect::<Vec<_>>()))
        }
        false => Json(builder.response()).into_response(),
    };
    if let Ok(value) = axum::http::HeaderValue::from_str(reason.as_str()) {
        response.headers_mut().insert(STOP_REASON_HEADER, value);
    }
    response
}
