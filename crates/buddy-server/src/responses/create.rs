//! `POST /v1/responses`: a response, whole, streamed, or in the background.

use axum::Json;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use buddy_core::ChatEvent;

use super::at_ceiling::at_ceiling;
use super::begin::{ResponsesRequest, begin};
use super::log::{response_log, stream};
use crate::error::AppError;
use crate::request::JsonBody;
use crate::turn::watch::Numbered;
use crate::turn::{CancelOnDrop, StartedTurn, Turns, frames, with_turn_header};

pub(crate) async fn responses(
    turns: Turns,
    headers: HeaderMap,
    JsonBody(body): JsonBody<ResponsesRequest>,
) -> Result<Response, AppError> {
    let streamed = body.stream;
    let background = body.background;
    if background && body.store == Some(false) {
        return Err(AppError::BadRequest(
            "`background: true` needs a stored response (a background response is read later \
             with GET /v1/responses/{id}); leave `store` out or set it to true"
                .into(),
        ));
    }
    let (model, instructions) = (body.model.clone(), body.instructions.clone());
    let (turn, mut builder) = match begin(&turns, body, None, Some(&headers)).await {
        Ok(begun) => begun,
        // A key at its money ceiling: an answer that ends the session, not an error the
        // client retries.
        Err(AppError::AtCeiling(why)) => {
            let (owner, model) = (turns.caller.owner.clone(), model.unwrap_or_default());
            let state = &turns.state;
            return Ok(at_ceiling(
                state,
                owner,
                model,
                instructions,
                streamed,
                &why,
            ));
        }
        Err(e) => return Err(e),
    };
    builder.background = background;
    let left_out = builder.echo.client.left_out.clone();
    let warned = |response: Response| left_out_header(response, &left_out);
    if streamed || background {
        let guard = match background {
            true => None,
            false => turns.disconnect_guard(turn.cancel.clone()),
        };
        let turn_id = turn.turn_id.clone();
        let response = builder.response();
        let log = response_log(&turns.state, turn, builder);
        if !streamed {
            return Ok(warned(Json(response).into_response()));
        }
        let numbered = frames(log.watch(0), Numbered::default(), guard);
        return Ok(warned(with_turn_header(stream(numbered), &turn_id)));
    }
    let StartedTurn {
        mut events, cancel, ..
    } = turn;
    let guard = CancelOnDrop(cancel);
    while let Some(event) = events.recv().await {
        if let ChatEvent::Error {
            reason, message, ..
        } = &event
        {
            return Err(AppError::TurnFailed {
                reason: *reason,
                message: message.clone(),
            });
        }
        builder.on_event(event);
    }
    drop(guard);
    Ok(warned(Json(builder.response()).into_response()))
}

/// Names the hosted tools (`web_search`, …) left out of the request in a `buddy-warning`
/// header: buddy's model servers do not run them, and refusing would stop the client.
fn left_out_header(mut response: Response, left_out: &[String]) -> Response {
    if left_out.is_empty() {
        return response;
    }
    let text = format!(
        "hosted tools left out (only OpenAI's own servers run them): {}",
        left_out.join(", ")
    );
    if let Ok(value) = axum::http::HeaderValue::from_str(&text) {
        response.headers_mut().insert("buddy-warning", value);
    }
    response
}
