//! One `tools/call` to its end: its `input_required` rounds (SEP-2322) answered by
//! buddy's handler, its progress routed to the caller, and `notifications/cancelled`
//! sent for it when it runs past its time (written before the call returns) or is
//! dropped (a cancelled turn).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, InputRequest, InputRequests, InputResponses, RequestId, ServerResult, Task,
};
use rmcp::service::{PeerRequestOptions, RoleClient, ServiceError};
use serde_json::Value;

use crate::requests::caller::Caller;
use crate::requests::handler::Client;
use crate::requests::progress::{Route, RouteKey};

/// Rounds of `input_required` answered before the call is given up (rmcp's default).
const MAX_INPUT_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

/// Sends `notifications/cancelled` for a request whose caller went away.
struct CancelOnDrop {
    peer: rmcp::Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        let mut params = CancelledNotificationParam::new(Some(id), None);
        params.reason = Some("the caller gave up the call".to_owned());
        // Drop cannot wait: the notification goes out from a task of its own.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.notify_cancelled(params).await;
            });
        }
    }
}

/// What buddy answers to each request of an `input_required` result: roots and
/// sampling through its handler (sampling drawn from the caller's turn budget),
/// elicitation by the person behind the call (declined when there is nobody to ask).
pub(crate) async fn answer_inputs(
    client: &Client,
    requests: InputRequests,
    caller: &Caller,
) -> Result<InputResponses, ServiceError> {
    let handler = client.service();
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let answer = match request {
            InputRequest::ListRoots(_) => serde_json::to_value(handler.roots()),
            InputRequest::CreateMessage(request) => {
                let result = handler
                    .sample(request.params, caller.budget.as_deref())
                    .await
                    .map_err(ServiceError::McpError)?;
                serde_json::to_value(result)
            }
            InputRequest::Elicitation(request) => {
                let elicitor = caller.elicitor.as_deref();
                Ok(
                    crate::requests::elicit::answer(&handler.server, &request.params, elicitor)
                        .await,
                )
            }
            _ => Ok(Value::Null),
        };
        let answer = answer.map_err(|_| ServiceError::UnexpectedResponse)?;
        responses.insert(key, answer);
    }
    Ok(responses)
}

/// How a `tools/call` came back: the tool's result, or a task to wait on (`task.rs`)
/// with the route of its request's progress token (a task's progress keeps using it).
pub(crate) enum Called {
    Done(CallToolResult),
    Task(Task, Option<Route>),
}

/// Calls the tool within `timeout` (all rounds together; the time a person takes to
/// answer an elicitation does not count: the server is not working then).
pub(crate) async fn call_tool(
    client: &Client,
    mut params: CallToolRequestParams,
    timeout: Duration,
    caller: &Caller,
) -> Result<Called, ServiceError> {
    let mut deadline = tokio::time::Instant::now() + timeout;
    let mut state_only_rounds = 0u32;
    for _ in 0..MAX_INPUT_ROUNDS {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
        let round = async {
            let handle = client
                .peer()
                .send_request_with_option(request, PeerRequestOptions::with_timeout(left))
                .await?;
            let mut guard = CancelOnDrop {
                peer: client.peer().clone(),
                id: Some(handle.id.clone()),
            };
            // The server's progress for this round goes to the caller.
            let route = caller.progress.as_ref().map(|sink| {
                let key = RouteKey::Token(handle.progress_token.clone());
                crate::requests::progress::route(
                    &client.service().notes.progress,
                    key,
                    Arc::clone(sink),
                )
            });
            // Past `left`, rmcp writes `notifications/cancelled` before it returns.
            let answered = handle.await_response().await;
            guard.id = None;
            // rmcp hands each notification to a task of its own, so one the server sent
            // just before its answer may be handled just after it.
            if let Some(route) = &route {
                route.settle().await;
            }
            answered.map(|answer| (answer, route))
        };
        // A backstop past rmcp's own bound, for a transport that blocks.
        let answered = tokio::time::timeout(left + Duration::from_secs(1), round)
            .await
            .map_err(|_| ServiceError::Timeout { timeout: left })?;
        let (answered, route) = answered?;
        match answered {
            ServerResult::CallToolResult(result) => return Ok(Called::Done(result)),
            ServerResult::CreateTaskResult(created) => {
                return Ok(Called::Task(created.task, route));
            }
            ServerResult::InputRequiredResult(result) => {
                let requests = result.input_requests.unwrap_or_default();
                if requests.is_empty() && result.request_state.is_none() {
                    return Err(ServiceError::UnexpectedResponse);
                }
                if requests.is_empty() {
                    // Only state to echo: the server is working; ask again, backing off.
                    let millis = (50u64 << state_only_rounds.min(3)).min(250);
                    tokio::time::sleep(Duration::from_millis(millis)).await;
                    state_only_rounds += 1;
                } else {
                    state_only_rounds = 0;
                }
                let asked = tokio::time::Instant::now();
                let responses = answer_inputs(client, requests, caller).await?;
                deadline += asked.elapsed();
                params.input_responses = (!responses.is_empty()).then_some(responses);
                params.request_state = result.request_state;
            }
            _ => return Err(ServiceError::UnexpectedResponse),
        }
    }
    Err(ServiceError::InputRequiredRoundsExceeded {
        max_rounds: MAX_INPUT_ROUNDS,
    })
}
