//! `POST /v1/conversations/{id}/fork`: a new conversation holding the history before one
//! message of another (edit and resend, regenerate), with its settings; the original is
//! untouched.

use std::collections::HashSet;

use axum::Json;
use axum::extract::Path;
use axum::http::StatusCode;
use buddy_core::Message;
use buddy_store::{ConversationDetail, ForkCopy};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::AppError;
use crate::request::{Client, JsonBody, owned_conversation};

/// The body of a fork: the index (in the conversation's `messages`) of the first message
/// the new conversation leaves out.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForkBody {
    before: usize,
}

/// The finished turns all of whose messages come before `before`, each with a new id for
/// its copy: the turns a fork copies with their records.
fn whole_turns(detail: &ConversationDetail, before: usize) -> Vec<(String, String)> {
    let cut = detail.message_turns.get(before..).unwrap_or_default();
    detail
        .turns
        .iter()
        .filter(|t| t.finished_at_ms.is_some())
        .filter(|t| detail.message_turns[..before.min(detail.message_turns.len())].contains(&t.id))
        .filter(|t| !cut.contains(&t.id))
        .map(|t| (t.id.clone(), buddy_store::new_id("turn")))
        .collect()
}

/// Why a history cut at `before` would leave a call without its result, if it would.
fn inside_a_round(messages: &[Message], before: usize) -> Option<String> {
    let mut open: HashSet<&str> = HashSet::new();
    let mut opened_at = 0;
    for (i, message) in messages[..before].iter().enumerate() {
        match message {
            Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                open.extend(tool_calls.iter().map(|c| c.id.as_str()));
                opened_at = i;
            }
            Message::Tool { tool_call_id, .. } => {
                open.remove(tool_call_id.as_str());
            }
            _ => {}
        }
    }
    (!open.is_empty()).then(|| {
        let closes = messages[before..]
            .iter()
            .position(|m| match m {
                Message::Tool { tool_call_id, .. } => {
                    open.remove(tool_call_id.as_str());
                    open.is_empty()
                }
                _ => false,
            })
            .map_or(messages.len(), |i| before + i + 1);
        format!(
            "message {before} is inside a tool round (the calls of message {opened_at} have results up to \
             message {}): fork before message {opened_at} or at message {closes}",
            closes.saturating_sub(1)
        )
    })
}

/// Copies the messages before `before` of conversation `id` into a new conversation of
/// the caller's, which records where it came from (`forked_from`, `fork_before`).
pub(crate) async fn fork(
    Client { state, caller }: Client,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ForkBody>,
) -> Result<(StatusCode, Json<Value>), AppError> {
    owned_conversation(&state, &caller, &id).await?;
    let store = &state.inner.store;
    let detail = store
        .get_conversation(&id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("conversation `{id}` does not exist")))?;
    let len = detail.messages.len();
    if body.before > len {
        return Err(AppError::BadRequest(format!(
            "`before` is {} but conversation `{id}` has {len} messages: give 0 to {len}",
            body.before
        )));
    }
    if let Some(why) = inside_a_round(&detail.messages, body.before) {
        return Err(AppError::BadRequest(why));
    }
    // The copy runs as the original did (its settings go with it) and reads as it did:
    // each turn copied whole keeps its record (times, how it ended, stats) under an id of
    // the copy's, and every message its time.
    let turns = whole_turns(&detail, body.before);
    let new_id = store
        .fork_conversation(ForkCopy {
            from: &id,
            owner: &caller.owner,
            before: body.before,
            turns: &turns,
        })
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "object": "conversation",
            "id": new_id,
            "forked_from": id,
            "fork_before": body.before,
            "messages": body.before,
        })),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use buddy_core::ToolCall;

    #[test]
    fn a_fork_may_not_cut_a_tool_round_in_two() {
        let messages = vec![
            Message::user("hi"),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall::new("a", "t", "{}"), ToolCall::new("b", "t", "{}")],
            },
            Message::tool_result("a", "1", false),
            Message::tool_result("b", "2", false),
            Message::assistant("done"),
        ];
        for before in [0, 1, 4, 5] {
            assert_eq!(inside_a_round(&messages, before), None, "{before}");
        }
        for before in [2, 3] {
            let why = inside_a_round(&messages, before).expect("inside");
            assert!(
                why.contains("fork before message 1 or at message 4"),
                "{why}"
            );
        }
    }
}
