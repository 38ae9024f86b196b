//! Conversations: list, read, rename and set up, delete — each key sees only its own (an admin key, all).

use axum::Json;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use buddy_store::StoreError;
use serde_json::{Value, json};

use crate::conversation_settings::ConversationSettings;
use crate::error::AppError;
use crate::request::{Client, JsonBody, owned_conversation};
use crate::turn::turn_policy;

/// The query of `GET /v1/conversations`.
#[derive(serde::Deserialize)]
pub(crate) struct ListQuery {
    /// Only conversations whose title or text (what people, the model and tools wrote)
    /// contains each of these words (split at white space), in any order, ignoring case.
    q: Option<String>,
}

/// Conversations a search reads through, newest first: a person's search, not an
/// archive query.
const SEARCHED: usize = 1000;

/// `GET /v1/conversations[?q=…]`: the caller's conversations, newest first.
pub(crate) async fn list(
    Client { state, caller }: Client,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, AppError> {
    let owner = (!caller.admin).then_some(caller.owner.as_str());
    let mut conversations = state.inner.store.list_conversations(owner).await?;
    let words: Vec<String> = query
        .q
        .as_deref()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    if !words.is_empty() {
        conversations.truncate(SEARCHED);
        let mut found = Vec::new();
        for summary in conversations {
            // Each word somewhere in the title or the text, in any order.
            let title = summary.title.to_lowercase();
            let mut missing: Vec<&str> = words
                .iter()
                .map(String::as_str)
                .filter(|w| !title.contains(w))
                .collect();
            if !missing.is_empty() {
                let messages = match state.inner.store.load_messages(&summary.id).await {
                    Ok(messages) => messages,
                    // A damaged conversation is not searched; the others still are.
                    Err(StoreError::Corrupt(e)) => {
                        tracing::warn!(conversation = %summary.id, error = %e, "not searched: a stored message is damaged");
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                let texts = messages
                    .iter()
                    .filter(|m| !matches!(m, buddy_core::Message::System { .. }))
                    .filter_map(buddy_core::Message::text);
                for text in texts {
                    let text = text.to_lowercase();
                    missing.retain(|w| !text.contains(w));
                    if missing.is_empty() {
                        break;
                    }
                }
            }
            if missing.is_empty() {
                found.push(summary);
            }
        }
        conversations = found;
    }
    Ok(Json(json!({"object": "list", "data": conversations})))
}

pub(crate) async fn get(
    Client { state, caller }: Client,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    owned_conversation(&state, &caller, &id).await?;
    match state.inner.store.get_conversation(&id).await? {
        Some(detail) => {
            let created = detail.created_at_ms / 1000;
            let metadata = detail.settings.get("metadata").cloned();
            let mut body =
                serde_json::to_value(detail).map_err(|e| AppError::Internal(e.to_string()))?;
            // The fields of OpenAI's conversation object, beside buddy's own.
            body["object"] = json!("conversation");
            body["created_at"] = json!(created);
            body["metadata"] = metadata.unwrap_or_else(|| json!({}));
            Ok(Json(body))
        }
        None => Err(AppError::NotFound(format!(
            "conversation `{id}` does not exist"
        ))),
    }
}

/// The body of `PATCH /v1/conversations/{id}`: a new title, new settings, or both.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PatchBody {
    title: Option<String>,
    settings: Option<Value>,
}

/// Longest title, in characters.
const MAX_TITLE_CHARS: usize = 200;

/// `PATCH /v1/conversations/{id}` with `{"title": "…"}` and/or `{"settings": {"system":
/// "…", "policy": {…}}}`: names a conversation, or sets what its next turns run with.
pub(crate) async fn update(
    client: Client,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<PatchBody>,
) -> Result<Json<Value>, AppError> {
    if body.title.is_none() && body.settings.is_none() {
        return Err(AppError::BadRequest(
            "send `title` (a new name), `settings` ({\"system\": …, \"policy\": …}) or both".into(),
        ));
    }
    let title = body.title.as_deref().map(str::trim);
    if let Some(title) = title
        && (title.is_empty() || title.chars().count() > MAX_TITLE_CHARS)
    {
        return Err(AppError::BadRequest(format!(
            "`title` must have 1 to {MAX_TITLE_CHARS} characters"
        )));
    }
    let settings = body.settings.map(ConversationSettings::parse).transpose()?;
    let info = client.conversation(&id).await?;
    let state = &client.state;
    // New settings keep the conversation's metadata unless they bring their own.
    let settings = settings.map(|mut new| {
        if new.metadata.is_none() {
            new.metadata = ConversationSettings::stored(&info.settings)
                .ok()
                .and_then(|old| old.metadata);
        }
        new
    });
    let gone = || AppError::NotFound(format!("conversation `{id}` does not exist"));
    let mut answer = json!({"id": id});
    if let Some(settings) = settings {
        // Refused now, not at the next turn: a policy above what the conversation's model
        // may run with.
        let resolved = client.resolve(None, info.last_model.as_deref())?;
        turn_policy(state, &resolved, &settings.policy)?;
        let kept = settings.to_value();
        if !state.inner.store.set_settings(&id, &kept).await? {
            return Err(gone());
        }
        answer["settings"] = kept;
    }
    if let Some(title) = title {
        if !state.inner.store.rename_conversation(&id, title).await? {
            return Err(gone());
        }
        answer["title"] = json!(title);
    }
    Ok(Json(answer))
}

pub(crate) async fn delete(
    Client { state, caller }: Client,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    owned_conversation(&state, &caller, &id).await?;
    if let Some(turn) = state.inner.coordinator.running_on(&id).await? {
        return Err(AppError::Conflict(format!(
            "conversation `{id}` has a turn running ({turn}); delete it once the turn has ended"
        )));
    }
    if state.inner.store.delete_conversation(&id).await? {
        Ok(Json(
            json!({"id": id, "object": "conversation.deleted", "deleted": true}),
        ))
    } else {
        Err(AppError::NotFound(format!(
            "conversation `{id}` does not exist"
        )))
    }
}

/// `POST /v1/turns/{id}/cancel`: stops a running turn of the caller's, on whichever
/// instance runs it. The turn ends `cancelled` on its own stream.
pub(crate) async fn cancel_turn(
    Client { state, caller }: Client,
    Path(turn): Path<String>,
) -> Result<(StatusCode, Json<Value>), AppError> {
    let owner = (!caller.admin).then_some(caller.owner.as_str());
    if state.cancel_turn(&turn, owner).await? {
        Ok((
            StatusCode::ACCEPTED,
            Json(json!({"turn_id": turn, "cancelling": true})),
        ))
    } else {
        Err(AppError::NotFound(format!(
            "no turn `{turn}` of yours is running; it may have ended already"
        )))
    }
}
