//! `POST /v1/chat/completions` and `GET /v1/models`.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use buddy_core::{ChatEvent, Message, ToolSpec};
use buddy_openai_wire::{ChatCompletionRequest, to_messages};
use serde_json::{Value, json};

use super::encoder::{ChatChunks, completion};
use crate::error::AppError;
use crate::request::{JsonBody, request_policy};
use crate::sse;
use crate::state::AppState;
use crate::turn::{
    Family, ModelAsk, ToolAsk, TurnSpec, Turns, client_conversation, frames, until_end,
    with_turn_header,
};

/// `GET /v1/models` (in Anthropic's shape when asked with `anthropic-version`).
pub(crate) async fn models(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let ids = state.inner.backend.models();
    if headers.contains_key("anthropic-version") {
        return Json(buddy_anthropic_wire::ModelList::of(&ids)).into_response();
    }
    let data: Vec<Value> = ids
        .into_iter()
        .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "buddy"}))
        .collect();
    Json(json!({"object": "list", "data": data})).into_response()
}

/// `POST /v1/chat/completions`.
pub(crate) async fn completions(
    turns: Turns,
    headers: HeaderMap,
    JsonBody(mut body): JsonBody<ChatCompletionRequest>,
) -> Result<Response, AppError> {
    let sampling = body.sampling().map_err(AppError::BadRequest)?;
    let history = to_messages(std::mem::take(&mut body.messages)).map_err(AppError::BadRequest)?;
    if !history.iter().any(Message::is_user) {
        return Err(AppError::BadRequest(
            "`messages` has no user message".into(),
        ));
    }
    let policy = request_policy(body.buddy_policy.take())?;
    let declared: Vec<ToolSpec> = body.tools.into_iter().map(ToolSpec::from).collect();
    let asked = ModelAsk::model(body.model.clone());
    let conversation = client_conversation(&turns.state, &headers, None, history);
    let turn = turns
        .start(TurnSpec {
            family: Family::OpenAi,
            sampling,
            cache_key: body.prompt_cache_key.take(),
            tools: ToolAsk {
                client: declared,
                ..ToolAsk::default()
            },
            ..TurnSpec::new(conversation, asked, policy)
        })
        .await?;
    let model = body.model.unwrap_or_else(|| turn.model.clone());
    let id = format!("chatcmpl-{}", turn.turn_id.trim_start_matches("turn_"));
    if body.stream {
        let include_usage = body.stream_options.is_some_and(|o| o.include_usage);
        let encoder = ChatChunks::new(id, model, include_usage);
        let guard = turns.disconnect_guard(turn.cancel);
        let stream = sse::respond(frames(turn.events, encoder, guard));
        return Ok(with_turn_header(stream, &turn.turn_id));
    }
    let (terminal, pending) = until_end(turn.events, turn.cancel).await;
    match terminal {
        Some(ChatEvent::Done {
            reason,
            answer,
            stats,
        }) => Ok(Json(completion(&id, &model, reason, answer, &stats, pending)).into_response()),
        Some(ChatEvent::Error {
            reason, message, ..
        }) => Err(AppError::TurnFailed { reason, message }),
        _ => Err(AppError::Internal(
            "the turn ended without a terminal event".into(),
        )),
    }
}
