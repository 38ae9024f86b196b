//! What every endpoint reads from a request the same way: a JSON body (every way it can
//! be wrong a 4xx that says how), a request's policy, and a conversation the caller owns.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody};
use buddy_engine::PolicyPatch;
use buddy_store::ConversationInfo;

use crate::auth::Caller;
use crate::error::AppError;
use crate::state::AppState;

/// Reads a JSON body, turning every way it can be wrong into a 4xx that says how.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<T, AppError> {
    let bytes = body.map_err(|e| match e {
        BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)) => {
            AppError::TooLarge(state.inner.settings.max_body_bytes)
        }
        // The body timed out (or the connection broke while it was read).
        BytesRejection::FailedToBufferBody(_) => {
            AppError::BodyTimeout(state.inner.settings.body_timeout)
        }
        other => AppError::BadRequest(other.body_text()),
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        AppError::BadRequest(format!("the body is not valid JSON for this endpoint: {e}"))
    })
}

/// The policy a request asks for (`None`: the operator's as it is); a bad one is a 400.
pub(crate) fn request_policy(value: Option<serde_json::Value>) -> Result<PolicyPatch, AppError> {
    match value {
        Some(value) => {
            PolicyPatch::from_value(value).map_err(|e| AppError::BadRequest(e.to_string()))
        }
        None => Ok(PolicyPatch::default()),
    }
}

/// The conversation if `caller` may use it. Another key's conversation is answered
/// exactly like one that does not exist, so ids cannot be probed.
pub(crate) async fn owned_conversation(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<ConversationInfo, AppError> {
    match state.inner.store.conversation_info(id).await? {
        Some(info) if caller.may_use(&info.owner) => Ok(info),
        _ => Err(AppError::NotFound(format!(
            "conversation `{id}` does not exist"
        ))),
    }
}
