//! `POST /v1/chat/completions` and `GET /v1/models`, as OpenAI clients expect them.
//!
//! buddy runs its own skills server-side and answers with the final answer; tools the
//! client declares are handed back as ordinary `tool_calls` (the turn pauses there).
//! The stream satisfies the official SDK's strict `.stream()` helper: every chunk is a
//! `chat.completion.chunk` with integer `choices[].index`, tool-call pieces carry a
//! 0-based gap-free `index`, then `[DONE]`. Usage is streamed only when the request asks
//! (`stream_options.include_usage`), as OpenAI does: `"usage": null` on every chunk and
//! the figures in a last `choices: []` chunk — clients that read `choices[0]` of every
//! chunk would break on that chunk otherwise.

mod create;
mod encoder;

use axum::Router;
use axum::routing::{get, post};

use crate::state::AppState;

/// The Chat Completions routes, and the model list OpenAI clients read.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/chat/completions", post(create::completions))
        .route("/v1/models", get(create::models))
}
