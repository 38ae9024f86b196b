//! buddy's own API: stored conversations and their turns, streamed as `ChatEvent`s
//! (numbered, so a client reattaches from any point), approvals and continuations,
//! conversation settings, forks and replays.

mod chat;
mod conversations;
mod elicitations;
mod events;
mod fork;
mod replay;

use axum::Router;
use axum::routing::{get, post};

use crate::state::AppState;

pub use replay::{PolicyFrom, StoredTurn, replay_policy, stored_turns};

/// The native routes; `/v1/conversations` (list) and `/v1/conversations/{id}` are shared
/// with the OpenAI Conversations API, whose family adds its methods to them.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/chat", post(chat::chat))
        .route("/v1/conversations", get(conversations::list))
        .route(
            "/v1/conversations/{id}",
            get(conversations::get)
                .patch(conversations::update)
                .delete(conversations::delete),
        )
        .route("/v1/conversations/{id}/resume", post(chat::resume))
        .route(
            "/v1/conversations/{id}/replay",
            post(replay::replay_conversation),
        )
        .route("/v1/conversations/{id}/fork", post(fork::fork))
        .route("/v1/turns/{id}/cancel", post(conversations::cancel_turn))
        .route("/v1/turns/{id}/events", get(events::events))
        .route(
            "/v1/turns/{id}/elicitations/{eid}",
            post(elicitations::answer),
        )
}
