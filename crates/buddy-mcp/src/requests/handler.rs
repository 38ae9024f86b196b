//! buddy's side of an MCP connection: who it says it is, the roots it offers (the
//! sandbox), and the notifications it notes (tool list changes, progress and task
//! status, routed to their calls).

// Roots are deprecated by SEP-2577 (2026-07-28) yet still asked for, by older servers
// and through `inputRequests`: buddy answers them.
#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    Implementation, ListRootsResult, ProgressNotificationParam, Root, RootsCapabilities,
    SamplingCapability,
};

use crate::requests::progress::RouteKey;
use crate::requests::sampling::{Sampler, SamplingCount};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData};

/// What the handler shares with its [`crate::McpSource`]: flags and counters the
/// notifications set.
#[derive(Default)]
pub(crate) struct Notes {
    /// Set when the server announced a tool list change.
    pub changed: AtomicBool,
    /// Tool list changes the server announced since buddy started.
    pub changes_seen: AtomicU32,
    /// Progress notifications the server sent since buddy started.
    pub progress_seen: AtomicU32,
    /// `roots/list` requests the server sent since buddy started.
    pub roots_asked: AtomicU32,
    /// The last progress notification, as a line a person reads.
    pub last_progress: std::sync::Mutex<Option<String>>,
    /// The calls in flight and who made them, for a server-initiated elicitation or
    /// sampling request.
    pub askers: crate::requests::elicit::Askers,
    /// Where progress and task status go: the call each belongs to.
    pub progress: Arc<crate::requests::progress::ProgressRoutes>,
}

/// The client handler of one server connection.
pub(crate) struct Handler {
    pub server: String,
    pub notes: Arc<Notes>,
    /// Directories offered as roots (`file://` URIs), each with its name.
    pub roots: Vec<crate::config::roots::Root>,
    /// The model that answers sampling requests, when the operator allows them.
    pub sampler: Option<Sampler>,
    /// Sampling requests answered and their tokens.
    pub sampling: Arc<SamplingCount>,
}

/// `file://` URI of an absolute path, its bytes outside the unreserved set and `/`
/// percent-encoded (RFC 8089).
pub fn file_uri(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file://");
    for &byte in path.as_os_str().as_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(byte as char)
            }
            other => uri.push_str(&format!("%{other:02X}")),
        }
    }
    uri
}

/// One line for a progress notification: `3/10: copying` or `40%`.
pub(crate) fn progress_line(params: &ProgressNotificationParam) -> String {
    let amount = match params.total {
        Some(total) if total > 0.0 => format!("{}/{}", params.progress, total),
        _ => format!("{}", params.progress),
    };
    match params.message.as_deref() {
        Some(message) if !message.is_empty() => format!("{amount}: {message}"),
        _ => amount,
    }
}

impl Handler {
    /// The roots buddy offers this server (its `roots` setting).
    pub(crate) fn roots(&self) -> ListRootsResult {
        let roots = self
            .roots
            .iter()
            .map(|offered| {
                let mut root = Root::new(file_uri(&offered.dir));
                root.name = Some(offered.name.clone());
                root
            })
            .collect();
        ListRootsResult::new(roots)
    }

    /// A sampling request answered by buddy's model, drawn from the budget of the turn
    /// whose call it came in (none outside a turn); refused when the operator did not
    /// allow sampling for this server, or the turn's budget is spent.
    pub(crate) async fn sample(
        &self,
        params: CreateMessageRequestParams,
        budget: Option<&dyn buddy_core::CallBudget>,
    ) -> Result<CreateMessageResult, ErrorData> {
        match &self.sampler {
            Some(sampler) => {
                crate::requests::sampling::answer(
                    &self.server,
                    sampler,
                    &self.sampling,
                    params,
                    budget,
                )
                .await
            }
            None => Err(ErrorData::method_not_found::<
                rmcp::model::CreateMessageRequestMethod,
            >()),
        }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if !self.roots.is_empty() {
            // The roots are fixed for a connection (its entry and the sandbox do not
            // change while buddy runs): `listChanged` is false and no
            // `notifications/roots/list_changed` is owed (MCP 2025-11-25, Roots).
            let mut roots = RootsCapabilities::default();
            roots.list_changed = Some(false);
            capabilities.roots = Some(roots);
        }
        if self.sampler.is_some() {
            capabilities.sampling = Some(SamplingCapability::default());
        }
        // Forms only: buddy shows a form to the person behind the call; it opens no URLs.
        capabilities.elicitation = Some(
            rmcp::model::ElicitationCapability::new()
                .with_form(rmcp::model::FormElicitationCapability::default()),
        );
        // Tasks (SEP-2663): a server may answer a long call with a task buddy waits on.
        let mut extensions = rmcp::model::ExtensionCapabilities::new();
        extensions.insert(
            rmcp::model::TASKS_EXTENSION_ID.to_owned(),
            serde_json::Map::new(),
        );
        capabilities.extensions = Some(extensions);
        ClientConfig::new(
            capabilities,
            Implementation::new("buddy", env!("CARGO_PKG_VERSION")),
        )
    }

    fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> impl std::future::Future<Output = Result<ListRootsResult, ErrorData>> + Send + '_ {
        self.notes.roots_asked.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(self.roots()))
    }

    /// A server-initiated `sampling/createMessage`: drawn from the budget of the turn of
    /// the server's oldest call in flight; refused when no call is in flight (no turn to
    /// count it in).
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        if self.sampler.is_none() {
            return self.sample(params, None).await;
        }
        let Some(caller) = self.notes.askers.oldest() else {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode(-1),
                "buddy answers sampling requests only while one of this server's tool calls runs (it is counted in that call's turn)",
                None,
            ));
        };
        self.sample(params, caller.budget.as_deref()).await
    }

    /// A server-initiated `elicitation/create` (2025-11-25): put to the person behind the
    /// server's one call in flight; declined when there is none, or several.
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, ErrorData> {
        let elicitor = self.notes.askers.only();
        let answer =
            crate::requests::elicit::answer(&self.server, &request, elicitor.as_deref()).await;
        serde_json::from_value(answer).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.notes.changed.store(true, Ordering::SeqCst);
        self.notes.changes_seen.fetch_add(1, Ordering::SeqCst);
        std::future::ready(())
    }

    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        let line = progress_line(&params);
        tracing::info!(server = %self.server, progress = %line, "MCP progress");
        self.notes.progress_seen.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut last) = self.notes.last_progress.lock() {
            *last = Some(line);
        }
        self.notes.progress.deliver(
            RouteKey::Token(params.progress_token.clone()),
            crate::requests::progress::of_notification(&params),
        );
        std::future::ready(())
    }

    /// A task's status notification (`notifications/tasks`): to the call waiting on it.
    fn on_task_status(
        &self,
        params: rmcp::model::TaskStatusNotificationParams,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        let task = &params.task.task;
        tracing::debug!(server = %self.server, task = %task.task_id, "MCP task status");
        self.notes.progress.deliver(
            RouteKey::Task(task.task_id.clone()),
            crate::requests::progress::of_task(task),
        );
        std::future::ready(())
    }
}

/// A running connection to one MCP server, answered by buddy's handler.
pub(crate) type Client = rmcp::service::RunningService<rmcp::RoleClient, Handler>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_encode_what_a_uri_cannot_hold() {
        assert_eq!(
            file_uri(std::path::Path::new("/srv/my notes/ü")),
            "file:///srv/my%20notes/%C3%BC"
        );
    }

    #[test]
    fn progress_reads_as_a_line() {
        let mut params: ProgressNotificationParam = serde_json::from_value(
            serde_json::json!({"progressToken": 1, "progress": 3, "total": 10, "message": "copying"}),
        )
        .unwrap();
        assert_eq!(progress_line(&params), "3/10: copying");
        params.total = None;
        params.message = None;
        assert_eq!(progress_line(&params), "3");
    }
}
