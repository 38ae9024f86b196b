//! OpenAI's Conversations API over buddy's own conversations (the same store, the same
//! ids, scoped to the key): create one with items, list and add its items. Reading and
//! deleting one are buddy's own `GET`/`DELETE /v1/conversations/{id}`, whose answers
//! carry the fields OpenAI's conversation object has. A response continues one with
//! `"conversation": "conv_…"`.

use axum::Json;
use axum::extract::{Path, Query};
use serde::Deserialize;
use serde_json::{Value, json};

use buddy_core::Message;
use buddy_store::ConversationDetail;

use serde_json::Map;

use super::input::input_messages;
use super::items::{list, message_items};
use crate::conversation_settings::{ConversationSettings, checked_metadata};
use crate::error::AppError;
use crate::request::{Client, JsonBody, JsonOrEmpty, owned_conversation};
use crate::storage_quota;

/// The body of `POST /v1/conversations` and of `POST /v1/conversations/{id}/items`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct ItemsBody {
    #[serde(default)]
    items: Option<Value>,
    /// Kept with the conversation (`POST /v1/conversations` only).
    #[serde(default)]
    metadata: Option<Value>,
}

/// The body of `POST /v1/conversations/{id}`: its new metadata.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateBody {
    metadata: Value,
}

/// The conversation object of OpenAI's API.
fn conversation_object(id: &str, created_at_ms: i64, settings: &Value) -> Value {
    let metadata = settings
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| json!({}));
    json!({"id": id, "object": "conversation", "created_at": created_at_ms / 1000, "metadata": metadata})
}

/// `metadata` checked as OpenAI's API checks it; `null` is none.
fn metadata_of(value: Option<Value>) -> Result<Option<Map<String, Value>>, AppError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => checked_metadata(value)
            .map(Some)
            .map_err(AppError::BadRequest),
    }
}

/// `POST /v1/conversations/{id}`: replaces the conversation's metadata; answers the
/// conversation.
pub(crate) async fn update(
    client: Client,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<UpdateBody>,
) -> Result<Json<Value>, AppError> {
    let metadata = metadata_of(Some(body.metadata))?.unwrap_or_default();
    let detail = detail_of(&client, &id).await?;
    let mut settings = ConversationSettings::stored(&detail.settings)?;
    settings.metadata = Some(metadata);
    let kept = settings.to_value();
    let store = &client.state.inner.store;
    if !store.set_settings(&id, &kept).await? {
        return Err(AppError::NotFound(format!(
            "conversation `{id}` does not exist"
        )));
    }
    Ok(Json(conversation_object(&id, detail.created_at_ms, &kept)))
}

/// `POST /v1/conversations`: a new conversation of the caller's, holding `items`.
pub(crate) async fn create(
    Client { state, caller }: Client,
    JsonOrEmpty(body): JsonOrEmpty<ItemsBody>,
) -> Result<Json<Value>, AppError> {
    let metadata = metadata_of(body.metadata)?;
    let messages = input_messages(
        &state.inner.items,
        &caller.owner,
        body.items.unwrap_or(Value::Null),
    )
    .map_err(|e| AppError::BadRequest(e.replace("input[", "items[")))?;
    every_result_has_its_call(&[], &messages)?;
    storage_quota::check(&state, &caller, stored_size(&messages)).await?;
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
    let settings = ConversationSettings {
        metadata,
        ..ConversationSettings::default()
    }
    .to_value();
    if settings.get("metadata").is_some()
        && let Err(e) = store.set_settings(&id, &settings).await
    {
        let _ = store.delete_conversation(&id).await;
        return Err(e.into());
    }
    let created = store
        .get_conversation(&id)
        .await?
        .map_or(0, |d| d.created_at_ms);
    Ok(Json(conversation_object(&id, created, &settings)))
}

/// The query of `GET /v1/conversations/{id}/items`.
#[derive(Deserialize)]
pub(crate) struct ItemsQuery {
    /// `asc` or `desc` (the default, newest first, as OpenAI's API).
    order: Option<String>,
    /// Items per page: 1 to 1,000, 20 by default (as OpenAI's API).
    limit: Option<usize>,
    /// The page after this item id (`last_id` of the page before).
    after: Option<String>,
    /// Accepted (OpenAI's extra fields to include); buddy's items are whole already.
    #[allow(dead_code)]
    include: Option<Value>,
}

/// The conversation's items in order, each with the index of the message it is part of.
/// An item's id holds its message's number, which no removal changes.
fn numbered_items(detail: &ConversationDetail) -> Vec<(usize, Value)> {
    let hex = detail.id.trim_start_matches("conv_");
    detail
        .messages
        .iter()
        .zip(&detail.message_seqs)
        .enumerate()
        .flat_map(|(i, (m, seq))| {
            message_items(m, &format!("item_{hex}_{seq}"))
                .into_iter()
                .map(move |item| (i, item))
        })
        .collect()
}

/// The caller's conversation `id`, whole.
async fn detail_of(client: &Client, id: &str) -> Result<ConversationDetail, AppError> {
    client.conversation(id).await?;
    client
        .state
        .inner
        .store
        .get_conversation(id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("conversation `{id}` does not exist")))
}

/// `GET /v1/conversations/{id}/items`: a page of its items, after `after`.
pub(crate) async fn items(
    client: Client,
    Path(id): Path<String>,
    Query(query): Query<ItemsQuery>,
) -> Result<Json<Value>, AppError> {
    let detail = detail_of(&client, &id).await?;
    let mut all: Vec<Value> = numbered_items(&detail)
        .into_iter()
        .map(|(_, i)| i)
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
    if let Some(after) = &query.after {
        let at = all.iter().position(|i| i["id"] == after.as_str()).ok_or_else(|| {
            AppError::BadRequest(format!(
                "`after` = {after:?} is no item of conversation `{id}`: give the `last_id` of the page before"
            ))
        })?;
        all.drain(..=at);
    }
    let limit = query.limit.unwrap_or(20).clamp(1, 1000);
    let more = all.len() > limit;
    all.truncate(limit);
    let mut page = list(all);
    page["has_more"] = json!(more);
    Ok(Json(page))
}

/// `GET /v1/conversations/{id}/items/{item_id}`: one item.
pub(crate) async fn item(
    client: Client,
    Path((id, item_id)): Path<(String, String)>,
) -> Result<Json<Value>, AppError> {
    let detail = detail_of(&client, &id).await?;
    numbered_items(&detail)
        .into_iter()
        .map(|(_, item)| item)
        .find(|item| item["id"] == item_id.as_str())
        .map(Json)
        .ok_or_else(|| no_item(&id, &item_id))
}

fn no_item(id: &str, item_id: &str) -> AppError {
    AppError::NotFound(format!("conversation `{id}` has no item `{item_id}`"))
}

/// `DELETE /v1/conversations/{id}/items/{item_id}`: removes the item and answers with the
/// conversation. An item of a tool round (the call message, a call, a result) removes the
/// whole round — the call message and every result of its calls — so the conversation
/// stays one a model can be sent.
pub(crate) async fn delete_item(
    client: Client,
    Path((id, item_id)): Path<(String, String)>,
) -> Result<Json<Value>, AppError> {
    let detail = detail_of(&client, &id).await?;
    if let Some(turn) = client.state.inner.coordinator.running_on(&id).await? {
        return Err(AppError::Conflict(format!(
            "conversation `{id}` has a turn running ({turn}); delete items once it has ended"
        )));
    }
    let (at, _) = numbered_items(&detail)
        .into_iter()
        .find(|(_, item)| item["id"] == item_id.as_str())
        .ok_or_else(|| no_item(&id, &item_id))?;
    let seqs: Vec<i64> = round_of(&detail.messages, at)
        .into_iter()
        .filter_map(|i| detail.message_seqs.get(i).copied())
        .collect();
    client.state.inner.store.remove_messages(&id, &seqs).await?;
    Ok(Json(conversation_object(
        &id,
        detail.created_at_ms,
        &detail.settings,
    )))
}

/// The messages that go with message `at`: itself, or, in a tool round, the call message
/// and every result of its calls.
fn round_of(messages: &[Message], at: usize) -> Vec<usize> {
    let call_message = match &messages[at] {
        Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => Some(at),
        Message::Tool { tool_call_id, .. } => messages[..at].iter().rposition(|m| {
            matches!(m, Message::Assistant { tool_calls, .. }
                if tool_calls.iter().any(|c| &c.id == tool_call_id))
        }),
        _ => None,
    };
    let Some(call_at) = call_message else {
        return vec![at];
    };
    let Message::Assistant { tool_calls, .. } = &messages[call_at] else {
        return vec![at];
    };
    let mut round = vec![call_at];
    round.extend(
        messages
            .iter()
            .enumerate()
            .skip(call_at + 1)
            .filter_map(|(i, m)| {
                matches!(m, Message::Tool { tool_call_id, .. }
            if tool_calls.iter().any(|c| &c.id == tool_call_id))
                .then_some(i)
            }),
    );
    if !round.contains(&at) {
        round.push(at);
    }
    round
}

/// `POST /v1/conversations/{id}/items`: adds items (a turn's history) to a conversation.
pub(crate) async fn add_items(
    Client { state, caller }: Client,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ItemsBody>,
) -> Result<Json<Value>, AppError> {
    if body.metadata.as_ref().is_some_and(|m| !m.is_null()) {
        return Err(AppError::BadRequest(
            "`metadata` is set with POST /v1/conversations/{id}, not with items".into(),
        ));
    }
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
    every_result_has_its_call(&store.load_messages(&id).await?, &messages)?;
    storage_quota::check(&state, &caller, stored_size(&messages)).await?;
    store
        .append_messages(&id, &buddy_store::new_id("items"), &messages)
        .await?;
    let detail = store
        .get_conversation(&id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("conversation `{id}` does not exist")))?;
    let first_added = detail.messages.len().saturating_sub(messages.len());
    let added: Vec<Value> = numbered_items(&detail)
        .into_iter()
        .filter(|(i, _)| *i >= first_added)
        .map(|(_, item)| item)
        .collect();
    Ok(Json(list(added)))
}

/// Refuses added messages holding a tool result that answers no open call — one the
/// assistant message right before its run of results made (in `history` or among
/// `added`), as every model server requires: every later turn would be refused for it.
fn every_result_has_its_call(history: &[Message], added: &[Message]) -> Result<(), AppError> {
    let mut open: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for (i, message) in history.iter().chain(added).enumerate() {
        match message {
            Message::Assistant { tool_calls, .. } => {
                open = tool_calls.iter().map(|c| c.id.as_str()).collect();
            }
            Message::Tool { tool_call_id, .. } => {
                if !open.remove(tool_call_id.as_str()) && i >= history.len() {
                    return Err(AppError::BadRequest(format!(
                        "items: a `function_call_output` for call `{tool_call_id}`, which no \
                         `function_call` before it made (or one answered already); add the call \
                         (a `function_call` item with that `call_id`) right before its output"
                    )));
                }
            }
            _ => open.clear(),
        }
    }
    Ok(())
}

/// About the bytes `messages` take in the store (their JSON).
fn stored_size(messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|m| serde_json::to_string(m).map_or(0, |json| json.len() as u64))
        .sum()
}
