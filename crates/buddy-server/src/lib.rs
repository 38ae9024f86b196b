//! buddy-server: the engine as a service — turns that run on their own, watched (and
//! reattached to) over SSE, conversations kept in a store, and the chat page.
//!
//! - `POST /v1/chat`: one turn as an SSE stream of `ChatEvent`s, conversations kept in a store;
//! - `GET /v1/turns/{id}/events`: a running turn's events again, from any point (reattach);
//! - `GET|PATCH|DELETE /v1/conversations[/{id}]` (title and settings), `GET /v1/models`,
//!   `GET /healthz`, `GET /metrics`;
//! - `POST /v1/chat/completions`: an OpenAI-compatible endpoint, so any OpenAI client gets
//!   loop-safe tool use by changing its base URL;
//! - `POST /v1/responses`: the OpenAI Responses API over the same turns;
//! - `POST /v1/conversations/{id}/replay`: what another policy would have done on its turns;
//! - `POST /v1/conversations/{id}/fork`: a new conversation from the history before a message.
//!
//! [`app`] builds the router (tests drive it without a socket); [`serve`] runs it with
//! auth, limits and graceful shutdown.

mod api_key;
mod app;
mod auth;
mod backend;
mod body;
mod chat;
mod client_tools;
mod compact;
mod compaction_item;
mod conn;
mod conversation_settings;
mod conversations;
mod conversations_openai;
mod error;
mod fork;
mod items;
mod metrics;
mod openai;
mod reattach;
mod replay;
mod request;
mod request_mcp;
mod responses;
mod responses_stored;
mod responses_ws;
mod serve;
mod spend;
mod sse;
mod state;
mod turn_log;
mod turns;
mod web;

pub use api_key::{ApiKey, BadKeyHash};
pub use app::app;
pub use backend::{Backend, BackendError, Resolved};
pub use error::AppError;
pub use items::SkillCalls;
pub use replay::{PolicyFrom, StoredTurn, replay_policy, stored_turns};
pub use serve::{ServeError, serve};
pub use spend::SpendCeiling;
pub use state::{AppState, ServerSettings};
