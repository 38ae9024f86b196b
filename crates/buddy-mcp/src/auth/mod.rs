//! OAuth 2.1 for HTTP MCP servers (the MCP authorization spec): on a 401 buddy finds
//! the authorization server, registers, sends the person to authorize in a browser,
//! and keeps the tokens (refreshed) for later runs; a 403 for a missing scope asks
//! again with the wider scope, once per call.

mod browser;
mod callback;
mod challenge;
mod flow;
mod settings;
mod store;

pub use browser::{Browser, HeadlessBrowser, TerminalBrowser};
pub(crate) use challenge::challenge_of;
pub(crate) use flow::{AUTHORIZATIONS_PER_CALL, Authorization};
pub use settings::OAuthConfig;
pub use store::FileCredentialStore;
