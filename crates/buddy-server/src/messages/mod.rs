//! `POST /v1/messages`: Anthropic's Messages API over buddy's turns, so Claude Code and
//! the Anthropic SDKs run through buddy by changing their base URL.
//!
//! - the request's whole history (`system`, text, images, documents, `tool_use`,
//!   `tool_result`) is the turn's context; the client's custom tools are offered beside
//!   buddy's skills and a call to one ends the reply with `tool_use` blocks
//!   (`stop_reason: tool_use`); the client sends the history back with its results, and
//!   the rounds it ran count against the turn's budget and guards (a client-tool loop is
//!   ended as a server-side one is);
//! - when buddy ends a turn (a loop, a cap, a money ceiling reached in the turn) the
//!   client gets an ordinary message with buddy's answer and `stop_reason: end_turn`;
//!   the stop reason is in the `buddy-stop-reason` header of a whole reply;
//! - streamed as Anthropic streams (`message_start`, `ping`, each block's start, deltas
//!   and stop, `message_delta` with the stop reason and usage, `message_stop`);
//! - errors in Anthropic's shape and status codes (529 for an overloaded model server),
//!   for every route under `/v1/messages` and the model list asked with
//!   `anthropic-version`;
//! - `POST /v1/messages/count_tokens` counts as buddy counts for the model's window;
//! - `tool_choice` (`auto`, `any`, `tool`, `none`, `disable_parallel_tool_use`) is
//!   honoured on every upstream (`tool_choice.rs`); `top_k` is refused by name (buddy's
//!   translated upstreams take temperature and top_p only);
//! - the client's `anthropic-beta` goes with its body to an Anthropic upstream, and the
//!   upstream's thinking and `redacted_thinking` blocks come back to the client first in
//!   its reply, signatures and all (`thinking.rs`), to be sent back as they were signed;
//! - what buddy cannot carry is named in a `buddy-warning` header, never dropped
//!   silently (thinking blocks of earlier replies, `cache_control` marks, Anthropic's own
//!   server tools).

mod count;
mod create;
mod encoder;
mod errors;
mod passthrough;
mod reply;
mod thinking;
mod tool_choice;

use axum::Router;
use axum::routing::post;

use crate::state::AppState;

pub(crate) use errors::anthropic_errors;

/// The Messages routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/messages", post(create::messages))
        .route("/v1/messages/count_tokens", post(count::count_tokens))
}
