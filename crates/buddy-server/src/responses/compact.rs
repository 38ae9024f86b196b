//! `POST /v1/responses/compact`: a conversation made short. Its user messages are kept
//! as they are; everything else is summarised by the model into one `compaction` item,
//! which later requests send back as input (buddy reads it as a system message holding
//! the summary).
//!
//! The item's `encrypted_content` is opaque to clients: base64 of a small JSON document
//! that only buddy reads. It is not encrypted — a client could write one itself, as it
//! could write any message — so it carries nothing the client may not see.

use std::sync::Arc;

use axum::Json;
use axum::response::{IntoResponse, Response};
use buddy_core::{Message, Usage};
use buddy_openai_wire::responses::{CompactionItem, Item, MessageItem, ResponseUsage};
use serde::Deserialize;
use serde_json::{Value, json};

use super::compaction_item::encode;
use super::ids::{conversation_of, turn_of};
use super::input::input_messages;
use crate::backend::Resolved;
use crate::error::AppError;
use crate::gate;
use crate::request::JsonBody;
use crate::turn::{Turns, unix_now};

/// The body of `POST /v1/responses/compact`.
#[derive(Deserialize)]
pub(crate) struct CompactRequest {
    model: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    previous_response_id: Option<String>,
    instructions: Option<String>,
    /// Accepted (a cache hint for providers that have one); buddy has no prompt cache.
    #[allow(dead_code)]
    prompt_cache_key: Option<String>,
}

/// The instruction the summarising call gets.
const SUMMARISE: &str = "You compact conversations. Below is a conversation between a user \
and an assistant, with the tools the assistant called and what they returned. Write a summary \
that lets the assistant carry on as if it had read all of it: every fact, number, name, \
decision, agreement and open question, what the tools found, and what the user still \
expects. Write only the summary, in the conversation's language.";

/// Largest summary accepted from the model (the item must stay small).
const MAX_SUMMARY_CHARS: usize = 64 * 1024;

pub(crate) async fn compact(
    turns: Turns,
    JsonBody(body): JsonBody<CompactRequest>,
) -> Result<Response, AppError> {
    let model = body.model.filter(|m| !m.trim().is_empty()).ok_or_else(|| {
        AppError::BadRequest(
            "`model` is required: name the model that writes the compaction summary".into(),
        )
    })?;
    let messages = to_compact(
        &turns,
        body.previous_response_id.as_deref(),
        body.input,
        body.instructions,
    )
    .await?;
    let resolved = turns.resolve(None, Some(&model))?;
    let (summary, usage) = gated_summary(&turns, &resolved, &messages).await?;
    let id = buddy_store::new_id("cmp");
    let id = id.trim_start_matches("cmp_");
    let mut output: Vec<Item> = messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| match m {
            Message::User { content, .. } => Some(Item::Message(MessageItem::user(
                format!("msg_{id}_{i}"),
                content,
            ))),
            _ => None,
        })
        .collect();
    output.push(Item::Compaction(CompactionItem {
        id: Some(format!("cmp_{id}")),
        encrypted_content: encode(&summary),
        created_by: Some("buddy".into()),
    }));
    Ok(Json(json!({
        "id": format!("resp_cmp_{id}"),
        "object": "response.compaction",
        "created_at": unix_now(),
        "output": output,
        "usage": ResponseUsage::new(usage.input_tokens, usage.cached_input_tokens, usage.output_tokens),
    }))
    .into_response())
}

/// The conversation to compact: the stored one `previous` belongs to, then `input`, with
/// `instructions` first; one with nothing but system messages is a 400.
async fn to_compact(
    turns: &Turns,
    previous: Option<&str>,
    input: Option<Value>,
    instructions: Option<String>,
) -> Result<Vec<Message>, AppError> {
    let state = &turns.state;
    let mut messages = match previous {
        Some(previous) => {
            let not_found = || {
                AppError::NotFound(format!(
                    "response `{previous}` does not exist or was not stored; send the conversation as `input`"
                ))
            };
            let id = conversation_of(previous).ok_or_else(not_found)?;
            let turn = turn_of(previous).ok_or_else(not_found)?;
            turns.conversation(&id).await.map_err(|_| not_found())?;
            // The response's own chain: its conversation up to the end of its turn.
            let detail = state
                .inner
                .store
                .get_conversation(&id)
                .await?
                .ok_or_else(not_found)?;
            if detail.live_turn(&turn).is_none() {
                return Err(not_found());
            }
            let end = detail.through_turn(&turn);
            let mut messages = detail.messages;
            messages.truncate(end);
            messages
        }
        None => Vec::new(),
    };
    let owner = &turns.caller.owner;
    messages.extend(
        input_messages(&state.inner.items, owner, input.unwrap_or(Value::Null))
            .map_err(AppError::BadRequest)?,
    );
    if let Some(instructions) = instructions {
        messages.insert(0, Message::system(instructions));
    }
    if !messages
        .iter()
        .any(|m| !matches!(m, Message::System { .. }))
    {
        return Err(AppError::BadRequest(
            "there is nothing to compact: send the conversation as `input` (or previous_response_id)"
                .into(),
        ));
    }
    Ok(messages)
}

/// Most tokens the summarising call may write (about [`MAX_SUMMARY_CHARS`]): with its
/// input, the worst case the spend gate holds.
const MAX_SUMMARY_TOKENS: u64 = 16 * 1024;

/// The summary of `messages`, made under the spend gate like any turn ([`gate::call_once`]).
async fn gated_summary(
    turns: &Turns,
    resolved: &Resolved,
    messages: &[Message],
) -> Result<(String, Usage), AppError> {
    let (state, caller) = (&turns.state, &turns.caller);
    let request = [
        Message::system(SUMMARISE),
        Message::user(transcript(messages)),
    ];
    let completion = gate::call_once(
        state,
        caller,
        gate::OneCall {
            provider: Arc::clone(&resolved.provider),
            model: resolved.model.clone(),
            messages: request.to_vec(),
            max_output_tokens: MAX_SUMMARY_TOKENS,
        },
    )
    .await?;
    summarised(completion)
}

/// The summary a completion wrote (cut to its bound) and what the call used.
fn summarised(
    completion: Result<buddy_core::Completion, buddy_core::ProviderError>,
) -> Result<(String, Usage), AppError> {
    let completion = completion.map_err(|e| AppError::TurnFailed {
        reason: buddy_core::StopReason::ProviderError,
        message: format!("the model could not write the summary: {e}"),
    })?;
    let summary: String = completion
        .text
        .trim()
        .chars()
        .take(MAX_SUMMARY_CHARS)
        .collect();
    if summary.is_empty() {
        return Err(AppError::TurnFailed {
            reason: buddy_core::StopReason::NoAnswer,
            message: "the model wrote an empty summary; try again or with another model".into(),
        });
    }
    Ok((summary, completion.usage.unwrap_or_default()))
}

/// The conversation as plain text for the summarising call: works with every provider,
/// whatever tool calls the history holds.
fn transcript(messages: &[Message]) -> String {
    let mut out = String::new();
    for message in messages {
        let line = match message {
            Message::System { content } => format!("[Instructions] {content}"),
            Message::User { content, .. } => format!("User: {content}"),
            Message::Note { content } => format!("[Note] {content}"),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut line = format!("Assistant: {}", content.as_deref().unwrap_or_default());
                for call in tool_calls {
                    line.push_str(&format!(
                        "\n  (called {} with {})",
                        call.name, call.arguments
                    ));
                }
                line
            }
            Message::Tool {
                content, is_error, ..
            } => format!(
                "Tool {}: {content}",
                if *is_error { "error" } else { "result" }
            ),
        };
        out.push_str(&line);
        out.push_str("\n\n");
    }
    out
}
