//! What every endpoint reads from a request the same way: a JSON body (the [`JsonBody`]
//! extractor: every way it can be wrong a 4xx that says how), a request's policy, and a
//! conversation the caller owns.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use buddy_engine::PolicyPatch;
use buddy_store::ConversationInfo;

use crate::backend::Resolved;
use crate::caller::Caller;
use crate::error::AppError;
use crate::state::AppState;

/// Who is asking and the server they ask: taken from the request once by every handler
/// that works for a caller (auth put the caller in the request's extensions).
#[derive(Clone)]
pub(crate) struct Client {
    pub state: AppState,
    pub caller: Caller,
}

impl FromRequestParts<AppState> for Client {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, AppError> {
        let caller = parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| AppError::Internal("the request passed no authentication".into()))?;
        Ok(Client {
            state: state.clone(),
            caller,
        })
    }
}

impl Client {
    /// The provider, tools and model a request names (the server's default for `None`);
    /// one the server does not have is a 400 saying which it has.
    pub(crate) fn resolve(
        &self,
        provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<Resolved, AppError> {
        self.state
            .inner
            .backend
            .resolve(provider, model)
            .map_err(|e| AppError::BadRequest(e.to_string()))
    }

    /// The conversation if the caller may use it (another key's is "does not exist").
    pub(crate) async fn conversation(&self, id: &str) -> Result<ConversationInfo, AppError> {
        owned_conversation(&self.state, &self.caller, id).await
    }
}

/// A handler's JSON body of type `T`. A body too large, too slow, or not JSON of that
/// shape is refused with a 4xx that says how (never axum's plain-text rejection).
pub(crate) struct JsonBody<T>(pub T);

impl<T: serde::de::DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, AppError> {
        parse_body(state, Bytes::from_request(request, state).await).map(JsonBody)
    }
}

/// A handler's JSON body of type `T` and the bytes it came as (for a body passed on as
/// it is), refused as [`JsonBody`] refuses.
pub(crate) struct JsonAndBytes<T>(pub T, pub Bytes);

impl<T: serde::de::DeserializeOwned> FromRequest<AppState> for JsonAndBytes<T> {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, AppError> {
        let bytes = Bytes::from_request(request, state).await;
        let raw = bytes.as_ref().ok().cloned().unwrap_or_default();
        parse_body(state, bytes).map(|value| JsonAndBytes(value, raw))
    }
}

/// Like [`JsonBody`], but an empty body is `T::default()` (endpoints whose every field is
/// optional).
pub(crate) struct JsonOrEmpty<T>(pub T);

impl<T: serde::de::DeserializeOwned + Default> FromRequest<AppState> for JsonOrEmpty<T> {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, AppError> {
        let body = Bytes::from_request(request, state).await;
        if body.as_ref().is_ok_and(Bytes::is_empty) {
            return Ok(JsonOrEmpty(T::default()));
        }
        parse_body(state, body).map(JsonOrEmpty)
    }
}

/// Reads a JSON body, turning every way it can be wrong into a 4xx that says how.
fn parse_body<T: serde::de::DeserializeOwned>(
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
