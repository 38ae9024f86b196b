//! `POST /v1/responses`: the OpenAI Responses API over buddy's turns.
//!
//! - `input` (a string or items: messages, `function_call`, `function_call_output`) and
//!   `instructions` (a system prompt for this response only);
//! - `function` tools are the client's: a call to one ends the response with
//!   `function_call` output items, and the client resumes with `function_call_output`
//!   items (after `previous_response_id`, or with the whole input again);
//! - buddy's own skills run server-side; each call appears as an `mcp_call` output item
//!   (`server_label: "buddy"`) carrying its arguments and output, or as a
//!   `buddy:skill_call` extension item when the request or the server asks for it;
//! - `previous_response_id` continues that response: its context is the response's own
//!   chain of ancestors, so responses form a tree — a response continued twice (or from
//!   an earlier point) starts a branch of its own (`store: false` keeps nothing, and
//!   such a response cannot be continued);
//! - `max_tool_calls` lowers the turn's tool-call limit; usage, errors and the stream's
//!   events are in the API's shapes.

mod at_ceiling;
mod begin;
mod builder;
mod compact;
mod compaction_item;
mod conversations;
mod create;
mod ids;
mod input;
mod items;
mod log;
mod stored;
mod ws;

use axum::Router;
use axum::routing::{get, post};

use crate::state::AppState;

/// The Responses routes, and the OpenAI Conversations API beside them.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/responses", post(create::responses).get(ws::upgrade))
        .route("/v1/responses/compact", post(compact::compact))
        .route(
            "/v1/responses/{id}",
            get(stored::retrieve).delete(stored::delete),
        )
        .route("/v1/responses/{id}/input_items", get(stored::input_items))
        .route("/v1/responses/{id}/cancel", post(stored::cancel))
        .route("/v1/conversations", post(conversations::create))
        .route("/v1/conversations/{id}", post(conversations::update))
        .route(
            "/v1/conversations/{id}/items",
            get(conversations::items).post(conversations::add_items),
        )
        .route(
            "/v1/conversations/{id}/items/{item_id}",
            get(conversations::item).delete(conversations::delete_item),
        )
}
