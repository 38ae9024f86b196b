//! Conversations: list, read, delete.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::error::AppError;
use crate::state::AppState;

pub(crate) async fn list(State(state): State<AppState>) -> Result<Json<Value>, AppError> {
    let conversations = state.inner.store.list_conversations().await?;
    Ok(Json(json!({"object": "list", "data": conversations})))
}

pub(crate) async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    match state.inner.store.get_conversation(&id).await? {
        Some(detail) => Ok(Json(
            serde_json::to_value(detail).map_err(|e| AppError::Internal(e.to_string()))?,
        )),
        None => Err(AppError::NotFound(format!(
            "conversation `{id}` does not exist"
        ))),
    }
}

pub(crate) async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, AppError> {
    if state.inner.store.delete_conversation(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::NotFound(format!(
            "conversation `{id}` does not exist"
        )))
    }
}
