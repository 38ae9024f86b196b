//! `POST /v1/turns/{id}/elicitations/{eid}`: a person answers a tool's question (an MCP
//! server's elicitation) that a running turn of theirs showed as `elicitation_required`.
//! `{"action": "accept", "content": {…}}`, `{"action": "decline"}` or
//! `{"action": "cancel"}`; content that does not fit the form is refused (400, naming
//! the field) and the question stays open.

use axum::Json;
use axum::extract::Path;
use axum::http::StatusCode;
use buddy_core::ElicitationAnswer;
use buddy_engine::AnswerError;
use serde_json::{Value, json};

use crate::error::AppError;
use crate::request::{Client, JsonBody};

/// Answers question `eid` of running turn `id` (the caller's own, or any for an admin).
pub(crate) async fn answer(
    Client { state, caller }: Client,
    Path((turn, id)): Path<(String, String)>,
    JsonBody(answer): JsonBody<ElicitationAnswer>,
) -> Result<(StatusCode, Json<Value>), AppError> {
    let owner = (!caller.admin).then_some(caller.owner.as_str());
    let desk = state.elicitation_desk(&turn, owner).ok_or_else(|| {
        AppError::NotFound(format!(
            "no turn `{turn}` of yours is running on this instance; it may have ended already"
        ))
    })?;
    let action = answer.action();
    match desk.answer(&id, answer) {
        Ok(()) => Ok((
            StatusCode::OK,
            Json(json!({"turn_id": turn, "id": id, "action": action})),
        )),
        Err(e @ AnswerError::Unknown(_)) => Err(AppError::NotFound(e.to_string())),
        Err(e @ AnswerError::Answered(_)) => Err(AppError::Conflict(e.to_string())),
        Err(e @ AnswerError::Invalid(_)) => Err(AppError::BadRequest(e.to_string())),
    }
}
