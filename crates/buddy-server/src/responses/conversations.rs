//! OpenAI's Conversations API over buddy's own conversations (the same store, the same
//! ids, scoped to the key): create one with items, list and add its items. Reading and
//! deleting one are buddy's own `GET`/`DELETE /v1/conversations/{id}`, whose answers
//! carry the fields OpenAI's conversation object has. A response continues one with
//! `"conversation": "conv_…"`.

use axum::Json;
use axum::extract::{Path, Query};
use serde::Deserialize;
use serde_json::{Value, json};

use super::input::input_messages;
use super::items::{list, message_items};
use crate::error::AppError;
use crate::request::{Client, JsonBody, JsonOrEmpty, owned_conversation};

/// The body of `POST /v1/conversations` and of `POST /v1/conversations/{id}/items`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct ItemsBody {
    #[serde(default)]
    items: Option<Value>,
    /// Not kept by buddy: refused unless empty.
    #[serde(default)]
    metadata: Option<Value>,
}

impl ItemsBody {
    fn check_metadata(&self) -> Result<(), AppError> {
        match &self.metadata {
            None | Some(Value::Null) => Ok(()),
            Some(Value::Object(m)) if m.is_empty() => Ok(()),
            Some(_) => Err(AppError::BadRequest(
                "`metadata` is not kept by buddy's conversations; leave it out".into(),
            )),
        }
    }
}

/// The conversation object of OpenAI's API.
fn conversation_object(id: &str, created_at_ms: i64) -> Value {
    json!({"id": id, "object": "conversation", "created_at": created_at_ms / 1000, "metadata": {}})
}

/// `POST /v1/conversations`: a new conversation of the caller's, holding `items`.
pub(crate) async fn create(
    Client { state, caller }: Client,
    JsonOrEmpty(body): JsonOrEmpty<ItemsBody>,
) -> Result<Json<Value>, AppError> {
    body.check_metadata()?;
    let messages = input_messages(
        &state.inner.items,
        &caller.owner,
        body.items.unwrap_or(Value::Null),
    )
    .map_err(|e| AppError::BadRequest(e.replace("input[", "items[")))?;
    let store = &state.inner.store;
    let id = store.create_conversation(&caller.owner).await?;
    if !messages.is_empty()
        && let Err(e) = store
            .append_messages(&id, &buddy_store::new_id("items"), &messages)
            .await
    {
        let _ = store.delete_conversation(&id).await;
        return Err(e.into());
    }
    let created = store
        .get_conversation(&id)
        .await?
        .map_or(0, |d| d.created_at_ms);
    Ok(Json(conversation_object(&id, created)))
}

/// The query of `GET /v1/conversations/{id}/items`.
#[derive(Deserialize)]
pub(crate) struct ItemsQuery {
    /// `asc` or `desc` (the default, newest first, as OpenAI's API).
    order: Option<String>,
    limit: Option<usize>,
}

/// `GET /v1/conversations/{id}/items`.
pub(crate) async fn items(
    Client { state, caller }: Client,
    Path(id): Path<String>,
    Query(query): Query<ItemsQuery>,
) -> Result<Json<Value>, AppError> {
    owned_conversation(&state, &caller, &id).await?;
    let detail = state
        .inner
        .store
        .get_conversation(&id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("conversation `{id}` does not exist")))?;
    let hex = id.trim_start_matches("conv_");
    let mut all: Vec<Value> = detail
        .messages
        .iter()
        .enumerate()
        .flat_map(|(i, m)| message_items(m, &format!("item_{hex}_{i}")))
        .collect();
    match query.order.as_deref() {
        None | Some("desc") => all.reverse(),
        Some("asc") => {}
        Some(other) => {
            return Err(AppError::BadRequest(format!(
                "order = {other:?}: use asc or desc"
            )));
        }
    }
    let limit = query.limit.unwrap_or(100).clamp(1, 1000);
    let more = all.len() > limit;
    all.truncate(limit);
    let mut page = list(all);
    page["has_more"] = json!(more);
    Ok(Json(page))
}

/// `POST /v1/conversations/{id}/items`: adds items (a turn's history) to a conversation.
pub(crate) async fn add_items(
    Client { state, caller }: Client,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ItemsBody>,
) -> Result<Json<Value>, AppError> {
    body.check_metadata()?;
    owned_conversation(&state, &caller, &id).await?;
    if let Some(turn) = state.inner.coordinator.running_on(&id).await? {
        return Err(AppError::Conflict(format!(
            "conversation `{id}` has a turn running ({turn}); add items once it has ended"
        )));
    }
    let messages = input_messages(
        &state.inner.items,
        &caller.owner,
        body.items.unwrap_or(Value::Null),
    )
    .map_err(|e| AppError::BadRequest(e.replace("input[", "items[")))?;
    if messages.is_empty() {
        return Err(AppError::BadRequest(
            "`items` is empty: send the items to add".into(),
        ));
    }
    let store = &state.inner.store;
    let before = store.load_messages(&id).await?.len();
    store
        .append_messages(&id, &buddy_store::new_id("items"), &messages)
        .await?;
    let hex = id.trim_start_matches("conv_");
    let added: Vec<Value> = messages
        .iter()
        .enumerate()
        .flat_map(|(i, m)| message_items(m, &format!("item_{hex}_{}", before + i)))
        .collect();
    Ok(Json(list(added)))
}
