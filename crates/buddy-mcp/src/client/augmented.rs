//! Task-augmented tool calls of MCP 2025-11-25 (SEP-1686), for tools that take no other
//! kind (`execution.taskSupport: "required"`): `tools/call` with a `task` parameter
//! answered by `{task}`, `tasks/get` polled at the task's `pollInterval` (its status
//! message to the caller's progress), `tasks/result` for the tool's result once the task
//! ends or needs input (the server asks its questions while that request is open), and
//! `tasks/cancel` when the caller gives up or the task outlives `task_timeout_secs`.
//!
//! rmcp 3.9 types only the 2026-07-28 Tasks extension (`task.rs`), whose shapes differ
//! (`resultType: "task"`, `pollIntervalMs`, `tasks/update`), so these requests go out as
//! custom ones and their answers are read as JSON.

use std::time::Duration;

use buddy_core::Progress;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, CustomRequest, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::{Value, json};

use super::task::{CancelTaskOnDrop, MIN_POLL, PollWaits, failed, out_of_time};
use crate::requests::caller::Caller;
use crate::requests::handler::Client;

/// Whether a refusal's words say the tool takes only task-augmented calls. The
/// TypeScript SDK answers such a call with a tool error "Tool … requires task
/// augmentation (taskSupport: 'required')"; the spec asks for error -32601.
pub(crate) fn needs_task(words: &str) -> bool {
    words.contains("requires task augmentation")
        || (words.contains("taskSupport") && words.contains("required"))
}

/// The words of an error result, or nothing for a result that is not an error.
pub(crate) fn error_words(result: &CallToolResult) -> Option<String> {
    if result.is_error != Some(true) {
        return None;
    }
    let words: Vec<&str> = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.as_str()))
        .collect();
    Some(words.join(" "))
}

/// How a task-augmented call ended.
pub(crate) enum Augmented {
    /// The tool's result (or an error result saying how the task ended).
    Result(CallToolResult),
    /// The server did not take the task-augmented call; what it said.
    Refused(String),
}

/// A 2025-11-25 task as `tasks/get` (or the call that made it) reports it.
#[derive(Debug, PartialEq)]
struct Status {
    id: String,
    status: String,
    message: Option<String>,
    poll: Option<Duration>,
}

impl Status {
    fn of(task: &Value) -> Option<Status> {
        Some(Status {
            id: task.get("taskId")?.as_str()?.to_owned(),
            status: task.get("status")?.as_str()?.to_owned(),
            message: task
                .get("statusMessage")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .map(str::to_owned),
            poll: task
                .get("pollInterval")
                .and_then(Value::as_u64)
                .map(Duration::from_millis),
        })
    }

    fn ended(&self) -> bool {
        matches!(self.status.as_str(), "completed" | "failed" | "cancelled")
    }
}

fn custom(method: &str, params: Value) -> ClientRequest {
    ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)))
}

/// A result as JSON, whichever of rmcp's shapes it was read into.
fn as_json(result: &ServerResult) -> Value {
    serde_json::to_value(result).unwrap_or(Value::Null)
}

/// Calls the tool as a task (within `call_limit` for the call itself) and waits for the
/// task's result within `task_limit`; the time a person takes to answer the server's
/// questions does not count, as the server is not working then.
pub(crate) async fn call_as_task(
    client: &Client,
    params: CallToolRequestParams,
    call_limit: Duration,
    task_limit: Duration,
    caller: &Caller,
) -> Result<Augmented, ServiceError> {
    let mut body = serde_json::to_value(&params).unwrap_or_else(|_| json!({}));
    let ttl = u64::try_from(task_limit.as_millis()).unwrap_or(u64::MAX);
    if let Value::Object(map) = &mut body {
        map.insert("task".to_owned(), json!({"ttl": ttl}));
    }
    let answer = client
        .peer()
        .send_request_with_option(
            custom("tools/call", body),
            PeerRequestOptions::with_timeout(call_limit),
        )
        .await?
        .await_response()
        .await;
    let created = match answer {
        Ok(ServerResult::CallToolResult(result)) => return Ok(Augmented::Result(result)),
        Ok(other) => as_json(&other),
        Err(ServiceError::McpError(error)) => return Ok(Augmented::Refused(error.message.into())),
        Err(other) => return Err(other),
    };
    let Some(task) = created.get("task").and_then(Status::of) else {
        return Ok(Augmented::Refused(format!(
            "it answered the task-augmented call with {created} instead of a task"
        )));
    };
    await_task(client, task, task_limit, caller)
        .await
        .map(Augmented::Result)
}

/// Polls `task` until it ends or needs input, then takes its result.
async fn await_task(
    client: &Client,
    mut task: Status,
    limit: Duration,
    caller: &Caller,
) -> Result<CallToolResult, ServiceError> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut guard = CancelTaskOnDrop::new(client, &task.id, |task_id| {
        custom("tasks/cancel", json!({"taskId": task_id}))
    });
    let mut told = None;
    let mut waits = PollWaits::new();
    loop {
        let now = (task.status.clone(), task.message.clone());
        if let Some(sink) = &caller.progress
            && told.as_ref() != Some(&now)
        {
            sink.report(Progress {
                status: Some(task.status.clone()),
                message: task.message.clone(),
                ..Progress::default()
            });
            told = Some(now);
        }
        if task.ended() || task.status == "input_required" {
            break;
        }
        let wait = waits.next(task.poll);
        if tokio::time::Instant::now() + wait > deadline {
            return Ok(out_of_time(&task.id, limit));
        }
        tokio::time::sleep(wait).await;
        let got = client
            .peer()
            .send_request(custom("tasks/get", json!({"taskId": task.id})))
            .await?;
        task = Status::of(&as_json(&got)).ok_or(ServiceError::UnexpectedResponse)?;
    }
    if task.status == "cancelled" {
        guard.task_id = None;
        return Ok(failed("the server cancelled the task".to_owned()));
    }
    // `tasks/result` waits for the end; the server puts its questions (elicitation)
    // while it is open.
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let result = client
        .peer()
        .send_request_with_option(
            custom("tasks/result", json!({"taskId": task.id})),
            PeerRequestOptions::with_timeout(left.max(MIN_POLL)),
        )
        .await?
        .await_response()
        .await;
    match result {
        Ok(ServerResult::CallToolResult(result)) => {
            guard.task_id = None;
            Ok(result)
        }
        Ok(other) => {
            guard.task_id = None;
            serde_json::from_value(as_json(&other)).map_err(|_| ServiceError::UnexpectedResponse)
        }
        Err(ServiceError::McpError(error)) => {
            guard.task_id = None;
            Ok(failed(format!(
                "the server's task failed: {}",
                error.message
            )))
        }
        Err(ServiceError::Timeout { .. }) => Ok(out_of_time(&task.id, limit)),
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    #[test]
    fn a_task_is_read_from_its_2025_shape() {
        let task = json!({"taskId": "t1", "status": "working", "statusMessage": "Gathering",
            "createdAt": "2026-01-01T00:00:00Z", "ttl": 300000, "pollInterval": 1000});
        assert_eq!(
            Status::of(&task),
            Some(Status {
                id: "t1".into(),
                status: "working".into(),
                message: Some("Gathering".into()),
                poll: Some(Duration::from_secs(1)),
            })
        );
        assert!(Status::of(&json!({"status": "working"})).is_none());
        assert!(
            Status::of(&json!({"taskId": "t", "status": "failed"}))
                .unwrap()
                .ended()
        );
    }

    #[test]
    fn a_refusal_for_want_of_a_task_is_recognised() {
        assert!(needs_task(
            "Tool simulate-research-query requires task augmentation (taskSupport: 'required')"
        ));
        assert!(!needs_task("Tool echo not found"));
        let refused = CallToolResult::error(vec![ContentBlock::text("requires task augmentation")]);
        assert_eq!(
            error_words(&refused).as_deref(),
            Some("requires task augmentation")
        );
        assert!(error_words(&CallToolResult::success(vec![ContentBlock::text("ok")])).is_none());
    }
}
