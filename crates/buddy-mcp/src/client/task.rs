//! Task-augmented tool calls (the 2026-07-28 Tasks extension, SEP-2663): a `tools/call`
//! the server answers with a task handle is waited on here, without model calls. buddy
//! polls `tasks/get` at the interval the task asks for (capped backoff when it names
//! none), answers its `input_required` rounds through the handler, and takes the tool's
//! result when the task completes; a failed or cancelled task is an error result the
//! model reads. A caller that gives up (a cancelled turn, a deadline) sends
//! `tasks/cancel`, and so does a task that outlives `task_timeout_secs`.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolResult, CancelTaskParams, CancelTaskRequest, ClientRequest, ContentBlock, DetailedTask,
    GetTaskParams, GetTaskRequest, ServerResult, Task, TaskPayload, UpdateTaskParams,
    UpdateTaskRequest,
};
use rmcp::service::{RoleClient, ServiceError};
use serde_json::Value;

use crate::client::call::answer_inputs;
use crate::requests::caller::Caller;
use crate::requests::handler::Client;
use crate::requests::progress::RouteKey;

/// The first wait between two polls when the task names no interval.
const FIRST_POLL: Duration = Duration::from_millis(500);
/// The longest wait between two polls, whatever the task asks for.
const MAX_POLL: Duration = Duration::from_secs(30);
/// The shortest wait a task may ask for.
pub(super) const MIN_POLL: Duration = Duration::from_millis(50);

/// The waits between polls of a task, for both task protocols: the interval the task
/// asks for (kept within `MIN_POLL`–`MAX_POLL`), else a backoff from `FIRST_POLL` that
/// doubles at every poll up to `MAX_POLL`.
pub(super) struct PollWaits {
    backoff: Duration,
}

impl PollWaits {
    pub(super) fn new() -> Self {
        PollWaits {
            backoff: FIRST_POLL,
        }
    }

    /// The wait before the next poll; `asked`: the interval the task asks for.
    pub(super) fn next(&mut self, asked: Option<Duration>) -> Duration {
        let wait = asked.unwrap_or(self.backoff).clamp(MIN_POLL, MAX_POLL);
        self.backoff = (self.backoff * 2).min(MAX_POLL);
        wait
    }
}

/// Sends `tasks/cancel` for a task whose caller went away, as its protocol writes it
/// (`cancel`: the request for a task id), for both task protocols.
pub(super) struct CancelTaskOnDrop {
    peer: rmcp::Peer<RoleClient>,
    /// The task, until its end is known (then nothing is sent).
    pub(super) task_id: Option<String>,
    cancel: fn(String) -> ClientRequest,
}

impl CancelTaskOnDrop {
    pub(super) fn new(client: &Client, task_id: &str, cancel: fn(String) -> ClientRequest) -> Self {
        CancelTaskOnDrop {
            peer: client.peer().clone(),
            task_id: Some(task_id.to_owned()),
            cancel,
        }
    }
}

impl Drop for CancelTaskOnDrop {
    fn drop(&mut self) {
        let Some(task_id) = self.task_id.take() else {
            return;
        };
        let peer = self.peer.clone();
        let request = (self.cancel)(task_id);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.send_request(request).await;
            });
        }
    }
}

/// The 2026-07-28 `tasks/cancel` request for `task_id`.
fn cancel_request(task_id: String) -> ClientRequest {
    ClientRequest::CancelTaskRequest(CancelTaskRequest::new(CancelTaskParams::new(task_id)))
}

/// Waits for `task` (just created by a `tools/call`) to end, within `limit`; returns the
/// tool's result, or an error result saying how the task ended. Its `input_required`
/// rounds are answered for `caller`; the person's time does not count. Each change of
/// its status (or status message), from a poll or a `notifications/tasks`, goes to the
/// caller's progress.
pub(crate) async fn await_task(
    client: &Client,
    task: Task,
    limit: Duration,
    caller: &Caller,
) -> Result<CallToolResult, ServiceError> {
    let mut deadline = tokio::time::Instant::now() + limit;
    let mut guard = CancelTaskOnDrop::new(client, &task.task_id, cancel_request);
    let task_id = task.task_id.clone();
    let notes = &client.service().notes;
    let _route = caller.progress.as_ref().map(|sink| {
        crate::requests::progress::route(
            &notes.progress,
            RouteKey::Task(task_id.clone()),
            Arc::clone(sink),
        )
    });
    let mut told = None;
    let mut tell = |task: &Task| {
        let now = (task.status, task.status_message.clone());
        if let Some(sink) = &caller.progress
            && told.as_ref() != Some(&now)
        {
            sink.report(crate::requests::progress::of_task(task));
            told = Some(now);
        }
    };
    tell(&task);
    let mut asked = task.poll_interval_ms;
    let mut waits = PollWaits::new();
    loop {
        let wait = waits.next(asked.map(Duration::from_millis));
        if tokio::time::Instant::now() + wait > deadline {
            // The guard cancels the task on the server.
            return Ok(out_of_time(&task_id, limit));
        }
        tokio::time::sleep(wait).await;
        let got = get_task(client, &task_id).await?;
        asked = got.task.poll_interval_ms.or(asked);
        tell(&got.task);
        match got.payload {
            TaskPayload::Working => {}
            TaskPayload::InputRequired { input_requests } => {
                let asked = tokio::time::Instant::now();
                let responses = answer_inputs(client, input_requests, caller).await?;
                deadline += asked.elapsed();
                let update = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(
                    UpdateTaskParams::new(&task_id, responses),
                ));
                client.peer().send_request(update).await?;
            }
            TaskPayload::Completed { result } => {
                guard.task_id = None;
                return serde_json::from_value(Value::Object(result))
                    .map_err(|_| ServiceError::UnexpectedResponse);
            }
            TaskPayload::Failed { error } => {
                guard.task_id = None;
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| Value::Object(error.clone()).to_string(), str::to_owned);
                return Ok(failed(format!("the server's task failed: {message}")));
            }
            TaskPayload::Cancelled => {
                guard.task_id = None;
                return Ok(failed("the server cancelled the task".to_owned()));
            }
            _ => {}
        }
    }
}

/// An error result the model reads.
/// The task `task_id` as the server reports it now (`tasks/get`).
pub(crate) async fn get_task(client: &Client, task_id: &str) -> Result<DetailedTask, ServiceError> {
    let request = ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(task_id)));
    match client.peer().send_request(request).await? {
        ServerResult::GetTaskResult(got) => Ok(got.task),
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

pub(super) fn failed(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// The error result of a task that outlived its time (its caller's guard cancels it).
pub(super) fn out_of_time(task_id: &str, limit: Duration) -> CallToolResult {
    failed(format!(
        "the server's task `{task_id}` did not finish within {:.0} s (task_timeout_secs) and was cancelled",
        limit.as_secs_f64()
    ))
}
