//! One tool call on a server: bounded in time, authorized again on a step-up, a task
//! handle waited on, and the result checked against the tool's output schema.

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{Elicitor, SkillError};
use rmcp::model::{CallToolRequestParams, CallToolResult, RequestMetaObject};
use rmcp::service::ServiceError;
use serde_json::Value;

use super::{McpSource, ServerState};
use crate::auth::{AUTHORIZATIONS_PER_CALL, challenge_of};
use crate::client::augmented::{error_words, needs_task};
use crate::client::call::Called;
use crate::requests::caller::Caller;
use crate::requests::handler::Client;

/// Why a call is made once more.
enum Again {
    /// The server wants (another) token: this challenge.
    Authorize(String),
    /// The server could not send its request mid-call on this connection.
    Handshake,
}

/// The Python MCP SDK (2.x) refuses `ctx.elicit()` and other requests of its own on a
/// 2026-07-28 connection, which has no server-to-client requests: INVALID_REQUEST,
/// "this transport context has no back-channel for server-initiated requests".
fn lacks_back_channel(error: &rmcp::ErrorData) -> bool {
    error.code == rmcp::model::ErrorCode::INVALID_REQUEST && error.message.contains("back-channel")
}

impl McpSource {
    /// Calls `tool` with `arguments`. Every failure is an error result the model reads;
    /// a crash or a hang also restarts the server for the next call.
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<String, SkillError> {
        self.call_traced(tool, arguments, None).await
    }

    /// [`McpSource::call`] as part of a trace: `traceparent` goes in the request's
    /// `params._meta`, as the MCP semantic conventions (SEP-414) describe.
    pub async fn call_traced(
        &self,
        tool: &str,
        arguments: Value,
        traceparent: Option<&str>,
    ) -> Result<String, SkillError> {
        self.call_checked(tool, arguments, traceparent, None, Caller::default())
            .await
    }

    /// [`McpSource::call_traced`] with the server's questions (elicitation) put to the
    /// person through `elicitor`: declined when it is `None`.
    pub async fn call_asking(
        &self,
        tool: &str,
        arguments: Value,
        elicitor: Option<Arc<dyn Elicitor>>,
    ) -> Result<String, SkillError> {
        let caller = Caller {
            elicitor,
            ..Caller::default()
        };
        self.call_checked(tool, arguments, None, None, caller).await
    }

    /// [`McpSource::call_attempt`], authorizing again and calling once more when the
    /// server refused the call for want of a token or a scope (a step-up).
    pub(crate) async fn call_checked(
        &self,
        tool: &str,
        arguments: Value,
        traceparent: Option<&str>,
        output: Option<&jsonschema::Validator>,
        caller: Caller,
    ) -> Result<String, SkillError> {
        let mut authorizations = 0;
        loop {
            let mut again = None;
            let called = self
                .call_attempt(
                    tool,
                    arguments.clone(),
                    traceparent,
                    output,
                    caller.clone(),
                    &mut again,
                )
                .await;
            match again {
                Some(Again::Authorize(challenge))
                    if called.is_err() && authorizations < AUTHORIZATIONS_PER_CALL =>
                {
                    authorizations += 1;
                    if let Err(e) = self.authorize(Some(&challenge)).await {
                        return Err(SkillError::Failed(e.to_string()));
                    }
                }
                // Once per server: the next connection is by the handshake.
                Some(Again::Handshake) if called.is_err() && self.use_handshake().await => {
                    tracing::info!(server = %self.config.name, tool, "an MCP server sends requests of its own mid-call: buddy speaks to it by the 2025-11-25 handshake from now on and calls again");
                }
                _ => return called,
            }
        }
    }

    /// [`McpSource::call_traced`], the result's `structuredContent` checked against the
    /// tool's output schema (`output`): a mismatch is noted in the text the model reads.
    /// A call refused for want of authorization leaves the server's challenge in
    /// `again`, and so does one that needed a back-channel the connection lacks.
    async fn call_attempt(
        &self,
        tool: &str,
        arguments: Value,
        traceparent: Option<&str>,
        output: Option<&jsonschema::Validator>,
        caller: Caller,
        again: &mut Option<Again>,
    ) -> Result<String, SkillError> {
        let name = &self.config.name;
        if let ServerState::GaveUp(why) = self.state() {
            return Err(SkillError::Failed(format!(
                "MCP server `{name}` is not available: it failed {} times ({why}); restart buddy after fixing it",
                self.config.max_restarts + 1
            )));
        }
        let client = match self.connected().await {
            Ok(client) => client,
            Err(e) => return Err(self.failed(e.to_string())),
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Value::Object(map) = arguments {
            params = params.with_arguments(map);
        }
        if let Some(traceparent) = traceparent {
            let mut meta = RequestMetaObject::new();
            meta.set_traceparent(traceparent);
            params.meta = Some(meta);
        }
        let secs = self.config.call_timeout_secs;
        // A server-initiated `elicitation/create` or sampling request during the call may
        // be this call's.
        let _asking = self.in_flight(&caller);
        // rmcp ends the call at `call_timeout_secs` (sending `notifications/cancelled`),
        // with a backstop of its own for a transport that blocks.
        let called = match self.is_task_only(tool) {
            true => self.call_as_task(&client, tool, params, &caller).await,
            false => self.call_plain(&client, tool, params, &caller).await,
        };
        match called {
            Err(ServiceError::Timeout { .. }) => {
                self.disconnect().await;
                Err(self.failed(format!(
                    "MCP server `{name}` did not answer `{tool}` within {secs}s; the server was stopped and is restarted for the next call"
                )))
            }
            Err(ServiceError::McpError(error)) if lacks_back_channel(&error) => {
                *again = Some(Again::Handshake);
                Err(SkillError::Failed(format!(
                    "MCP server `{name}` could not ask its question during `{tool}`: {}",
                    error.message
                )))
            }
            Err(ServiceError::McpError(error)) => Err(SkillError::Failed(format!(
                "MCP server `{name}` refused the call to `{tool}`: {} (JSON-RPC error {})",
                error.message, error.code.0
            ))),
            Err(other) => {
                self.disconnect().await;
                let refused = challenge_of(&other);
                if let Some(refused) = refused {
                    *again = Some(Again::Authorize(refused));
                    return Err(SkillError::Failed(format!(
                        "MCP server `{name}` refused the call to `{tool}` for want of authorization ({other})"
                    )));
                }
                Err(self.failed(format!(
                    "MCP server `{name}` stopped during the call to `{tool}` ({other}); it is restarted for the next call"
                )))
            }
            Ok(result) => crate::client::result::tool_result(&result, output),
        }
    }

    /// One `tools/call`; a task handle it comes back with is waited on (its own bound)
    /// outside the call's time. A tool that turns out to take only task-augmented calls
    /// (2025-11-25) is called again so, and so from then on.
    async fn call_plain(
        &self,
        client: &Client,
        tool: &str,
        params: CallToolRequestParams,
        caller: &Caller,
    ) -> Result<CallToolResult, ServiceError> {
        let limit = Duration::from_secs_f64(self.config.call_timeout_secs);
        let called = crate::client::call::call_tool(client, params.clone(), limit, caller).await;
        let refusal = match &called {
            Ok(Called::Done(result)) => error_words(result),
            Err(ServiceError::McpError(error)) => Some(error.message.to_string()),
            _ => None,
        };
        if refusal.as_deref().is_some_and(needs_task) {
            self.mark_task_only(tool);
            return self.call_as_task(client, tool, params, caller).await;
        }
        match called? {
            Called::Task(task, _route) => {
                self.record_task(caller, &task.task_id).await;
                let wait = Duration::from_secs_f64(self.config.task_timeout_secs);
                crate::client::task::await_task(client, task, wait, caller).await
            }
            Called::Done(result) => Ok(result),
        }
    }

    /// Marks `caller`'s call in flight while the guard lives, so the server's requests
    /// (elicitation, sampling) during it reach it.
    pub(crate) fn in_flight(&self, caller: &Caller) -> crate::requests::elicit::Asking<'_> {
        self.notes.askers.enter(caller.clone())
    }
}
