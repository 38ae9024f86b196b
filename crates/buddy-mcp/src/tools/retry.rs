//! A server that is not required and could not start: tried again in the background,
//! with backoff, a bounded number of times; when it comes up its tools join the table
//! (the next look at the table lists them, as after `notifications/tools/list_changed`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::client::source::{McpError, McpSource};

/// The waits before each try again: 1 s doubling to at most 60 s, 10 tries (about 5
/// minutes in all); then the server stays down until buddy starts again.
pub(crate) fn backoff() -> impl Iterator<Item = Duration> {
    (0..10u32).map(|i| Duration::from_secs((1u64 << i.min(6)).min(60)))
}

/// Reports `error` (a tracing warning; the CLI prints its own line) and tries `source`
/// again in the background. The task ends when the source is dropped.
pub(crate) fn start_later(source: &Arc<McpSource>, error: &McpError) {
    tracing::warn!(server = %source.config().name, %error, "an MCP server that is not required could not start; its tools are left out and it is tried again in the background");
    let weak: Weak<McpSource> = Arc::downgrade(source);
    tokio::spawn(async move {
        for wait in backoff() {
            if let Some(source) = weak.upgrade() {
                source.set_next_try(Some(std::time::Instant::now() + wait));
            }
            tokio::time::sleep(wait).await;
            let Some(source) = weak.upgrade() else {
                return;
            };
            source.set_next_try(None);
            match source.start().await {
                Ok(_) => {
                    tracing::info!(server = %source.config().name, "an MCP server came up; its tools join");
                    source.mark_tools_changed();
                    return;
                }
                Err(e) => {
                    tracing::debug!(server = %source.config().name, error = %e, "an MCP server is still down")
                }
            }
        }
        if let Some(source) = weak.upgrade() {
            source.give_up_starting();
            tracing::warn!(server = %source.config().name, "an MCP server did not come up; it is no longer tried");
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_backoff_doubles_to_a_minute_and_ends() {
        let waits: Vec<u64> = super::backoff().map(|d| d.as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60, 60]);
    }
}
