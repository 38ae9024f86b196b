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
use buddy_store::AnswerVerdict;
use serde_json::{Value, json};

use crate::error::AppError;
use crate::relay::Delivered;
use crate::request::{Client, JsonBody};

/// Answers question `eid` of running turn `id` (the caller's own, or any for an admin),
/// wherever it runs: on another instance the answer goes through the database
/// ([`crate::relay`]) and the status is the one that instance gives (`202` when it has
/// not taken it within a few seconds: it is kept, and taken when it next looks).
pub(crate) async fn answer(
    Client { state, caller }: Client,
    Path((turn, id)): Path<(String, String)>,
    JsonBody(answer): JsonBody<ElicitationAnswer>,
) -> Result<(StatusCode, Json<Value>), AppError> {
    let owner = (!caller.admin).then_some(caller.owner.as_str());
    let action = answer.action();
    let reply = |status| {
        Ok((
            status,
            Json(json!({"turn_id": turn, "id": id, "action": action})),
        ))
    };
    let Some(desk) = state.elicitation_desk(&turn, owner) else {
        return match state.answer_elsewhere(&turn, owner, &id, &answer).await? {
            Delivered::Verdict(AnswerVerdict::Taken) => reply(StatusCode::OK),
            Delivered::Verdict(AnswerVerdict::Unknown(why)) => Err(AppError::NotFound(why)),
            Delivered::Verdict(AnswerVerdict::Answered(why)) => Err(AppError::Conflict(why)),
            Delivered::Verdict(AnswerVerdict::Invalid(why)) => Err(AppError::BadRequest(why)),
            Delivered::Pending => reply(StatusCode::ACCEPTED),
        };
    };
    match desk.answer(&id, answer) {
        Ok(()) => reply(StatusCode::OK),
        Err(e @ AnswerError::Unknown(_)) => Err(AppError::NotFound(e.to_string())),
        Err(e @ AnswerError::Answered(_)) => Err(AppError::Conflict(e.to_string())),
        Err(e @ AnswerError::Invalid(_)) => Err(AppError::BadRequest(e.to_string())),
    }
}
