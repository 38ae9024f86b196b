//! One tool call on a server: bounded in time, authorized again on a step-up, a task
//! handle waited on, and the result checked against the tool's output schema.

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{Elicitor, SkillError};
use rmcp::model::{CallToolRequestParams, RequestMetaObject};
use rmcp::service::ServiceError;
use serde_json::Value;

use super::{McpSource, ServerState};
use crate::auth::{AUTHORIZATIONS_PER_CALL, challenge_of};
use crate::requests::caller::Caller;

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
            let mut challenge = None;
            let called = self
                .call_attempt(
                    tool,
                    arguments.clone(),
                    traceparent,
                    output,
                    caller.clone(),
                    &mut challenge,
                )
                .await;
            match challenge {
                Some(challenge) if called.is_err() && authorizations < AUTHORIZATIONS_PER_CALL => {
                    authorizations += 1;
                    if let Err(e) = self.authorize(Some(&challenge)).await {
                        return Err(SkillError::Failed(e.to_string()));
                    }
                }
                _ => return called,
            }
        }
    }

    /// [`McpSource::call_traced`], the result's `structuredContent` checked against the
    /// tool's output schema (`output`): a mismatch is noted in the text the model reads.
    /// A call refused for want of authorization leaves the server's challenge in
    /// `challenge`.
    async fn call_attempt(
        &self,
        tool: &str,
        arguments: Value,
        traceparent: Option<&str>,
        output: Option<&jsonschema::Validator>,
        caller: Caller,
        challenge: &mut Option<String>,
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
        let limit = Duration::from_secs_f64(secs);
        // A server-initiated `elicitation/create` or sampling request during the call may
        // be this call's.
        let _asking = self.in_flight(&caller);
        // rmcp ends the call at `limit` (sending `notifications/cancelled`), with a
        // backstop of its own for a transport that blocks.
        let called = crate::client::call::call_tool(&client, params, limit, &caller).await;
        // A task handle: waited on (its own bound) outside the call's time.
        let called = match called {
            Ok(crate::client::call::Called::Task(task, _route)) => {
                self.record_task(&caller, &task.task_id).await;
                let wait = Duration::from_secs_f64(self.config.task_timeout_secs);
                crate::client::task::await_task(&client, task, wait, &caller).await
            }
            Ok(crate::client::call::Called::Done(result)) => Ok(result),
            Err(e) => Err(e),
        };
        match called {
            Err(ServiceError::Timeout { .. }) => {
                self.disconnect().await;
                Err(self.failed(format!(
                    "MCP server `{name}` did not answer `{tool}` within {secs}s; the server was stopped and is restarted for the next call"
                )))
            }
            Err(ServiceError::McpError(error)) => Err(SkillError::Failed(format!(
                "MCP server `{name}` refused the call to `{tool}`: {} (JSON-RPC error {})",
                error.message, error.code.0
            ))),
            Err(other) => {
                self.disconnect().await;
                let refused = challenge_of(&other);
                if refused.is_some() {
                    *challenge = refused;
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

    /// Marks `caller`'s call in flight while the guard lives, so the server's requests
    /// (elicitation, sampling) during it reach it.
    pub(crate) fn in_flight(&self, caller: &Caller) -> crate::requests::elicit::Asking<'_> {
        self.notes.askers.enter(caller.clone())
    }
}
