//! buddy-server: the engine as a service — turns that run on their own, watched (and
//! reattached to) over SSE, conversations kept in a store, and the chat page.
//!
//! - `POST /v1/chat`: one turn as an SSE stream of `ChatEvent`s, conversations kept in a store;
//! - `GET /v1/turns/{id}/events`: a running turn's events again, from any point (reattach);
//! - `GET|PATCH|DELETE /v1/conversations[/{id}]` (title and settings), `GET /v1/models`,
//!   `GET /healthz`, `GET /v1/health` (each MCP server's state), `GET /metrics`;
//! - `POST /v1/chat/completions`: an OpenAI-compatible endpoint, so any OpenAI client gets
//!   loop-safe tool use by changing its base URL;
//! - `POST /v1/responses`: the OpenAI Responses API over the same turns;
//! - `POST /v1/messages` (and `/v1/messages/count_tokens`): Anthropic's Messages API over
//!   the same turns, for Claude Code and the Anthropic SDKs;
//! - `POST /v1/conversations/{id}/replay`: what another policy would have done on its turns;
//! - `POST /v1/conversations/{id}/fork`: a new conversation from the history before a message.
//!
//! The layout, from the top: [`app`] builds the router and serves it; one folder per API
//! family (`native/`, `chat_completions/`, `responses/`, `messages/`) holds that family's routes and
//! its encoder; every family starts and watches turns through the turn service (`turn/`);
//! under it, the request plumbing (auth, bodies, connections) and the shared state.

mod app;
mod auth;
mod backend;
mod body;
mod caller;
mod chat_completions;
mod client_session;
mod client_tools;
mod conn;
mod conversation_settings;
mod cors;
mod error;
mod gate;
mod health;
mod item_cache;
mod key_ledger;
mod messages;
mod metrics;
mod native;
mod relay;
mod request;
mod request_mcp;
mod responses;
mod retained_logs;
mod settings;
mod spend;
mod sse;
mod state;
mod storage_quota;
mod turn;
mod turn_log;
mod web;

pub use app::app;
pub use app::serve::{ServeError, serve};
pub use backend::{Backend, BackendError, Resolved};
pub use error::AppError;
pub use native::{PolicyFrom, StoredTurn, replay_policy, stored_turns};
pub use settings::{
    ApiKey, BadKeyHash, DEFAULT_MAX_STORED_BYTES_PER_KEY, KeyConfig, KeyError, SERVER_FIELDS,
    ServerSettings, Setting, SettingCheck, SettingError, SettingField, SettingFlag, SkillCalls,
    SpendCeiling,
};
pub use state::AppState;
