//! Model calls a tool makes mid-call on behalf of its server (an MCP server's
//! `sampling/createMessage`): drawn from the running turn's budget — its model calls,
//! tokens and money, the pool its sub-agents draw from — and counted in its stats.

use crate::{BoxFuture, Usage};

/// The running turn's budget as one tool call sees it; the engine hands one to every
/// call ([`crate::SkillContext::budget`]). Without one (a bare context) nothing is
/// counted.
pub trait CallBudget: std::fmt::Debug + Send + Sync {
    /// Draws one model call for `server`; `Err` says, in words for the server, why the
    /// turn has none left (its calls, tokens or money are spent). A refusal is shown on
    /// the turn's stream.
    fn draw<'a>(&'a self, server: &'a str) -> BoxFuture<'a, Result<(), String>>;
    /// Books what a drawn call to `model` used (`None`: the provider reported nothing),
    /// into the turn's stats and its stream.
    fn book<'a>(
        &'a self,
        server: &'a str,
        model: &'a str,
        usage: Option<Usage>,
    ) -> BoxFuture<'a, ()>;
}
