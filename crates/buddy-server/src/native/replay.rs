//! Replay of stored turns: each turn's tape with the conversation around it, played back
//! under another policy (`POST /v1/conversations/{id}/replay`, and `buddy replay`). Read
//! only: nothing is stored, no model or tool is called.

use std::collections::HashMap;

use axum::Json;
use axum::extract::Path;
use buddy_engine::{Comparison, LoopPolicy, PolicyConfig, PolicyPatch, Recording, Tape, replay};
use buddy_store::{Store, StoreError};
use serde::{Deserialize, Serialize};

use crate::error::AppError;
use crate::request::{Client, JsonBody, owned_conversation, request_policy};

/// One stored turn, ready to replay — or why it cannot be.
#[derive(Clone, Debug)]
pub struct StoredTurn {
    pub conversation: String,
    pub turn: String,
    pub model: String,
    pub recording: Result<Recording, String>,
    /// A tape was kept but cannot be read (a damaged store), as against none kept.
    pub unreadable: bool,
}

/// The turns of a stored conversation, oldest first, each with its recording.
pub async fn stored_turns(
    store: &dyn Store,
    conversation: &str,
) -> Result<Vec<StoredTurn>, StoreError> {
    let Some(detail) = store.get_conversation(conversation).await? else {
        return Err(StoreError::NotFound(conversation.to_owned()));
    };
    let tapes: HashMap<String, String> =
        store.turn_tapes(conversation).await?.into_iter().collect();
    let order: HashMap<&str, usize> = detail
        .turns
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id.as_str(), i))
        .collect();
    let mut turns = Vec::with_capacity(detail.turns.len());
    for (position, turn) in detail.turns.iter().enumerate() {
        // The turn's messages are the last of those stored under its id; the messages
        // before them are the history its request had.
        let end = detail
            .message_turns
            .iter()
            .rposition(|t| order.get(t.as_str()).is_some_and(|&o| o <= position))
            .map_or(0, |i| i + 1);
        let kept = tapes.contains_key(&turn.id);
        let recording = match tapes.get(&turn.id) {
            None => Err(
                "this turn has no tape: it ran before buddy kept tapes, or the server stopped during it"
                    .to_owned(),
            ),
            Some(json) => serde_json::from_str::<Tape>(json)
                .map_err(|e| format!("its tape is unreadable ({e})"))
                .and_then(|tape| {
                    Recording::from_conversation(tape, &detail.messages, end).ok_or_else(|| {
                        "its tape counts more messages than the conversation stores".to_owned()
                    })
                }),
        };
        turns.push(StoredTurn {
            conversation: conversation.to_owned(),
            turn: turn.id.clone(),
            model: turn.model.clone(),
            unreadable: kept && recording.is_err(),
            recording,
        });
    }
    Ok(turns)
}

/// Where the policy of a replay starts from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyFrom {
    /// The policy the turn ran with.
    #[default]
    Recorded,
    /// The policy the server's configuration gives the turn's model now.
    Config,
}

/// The policy to replay `recording` under: `from`, with `patch` on top.
pub fn replay_policy(
    recording: &Recording,
    from: PolicyFrom,
    config: &PolicyConfig,
    patch: &PolicyPatch,
) -> Result<LoopPolicy, buddy_engine::PolicyError> {
    let mut policy = match from {
        PolicyFrom::Recorded => recording.tape.policy.clone(),
        PolicyFrom::Config => config.resolve(&recording.tape.model, &[])?,
    };
    policy.apply(patch)?;
    Ok(policy)
}

/// The body of `POST /v1/conversations/{id}/replay`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplayBody {
    /// Only this turn (default: every turn of the conversation).
    #[serde(default)]
    turn: Option<String>,
    /// Fields to change, as in a chat request's `policy`.
    #[serde(default)]
    policy: Option<serde_json::Value>,
    #[serde(default)]
    policy_from: PolicyFrom,
}

/// One turn's replay in the endpoint's answer.
#[derive(Serialize)]
struct TurnReplay {
    turn: String,
    model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    replay: Option<Comparison>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// `POST /v1/conversations/{id}/replay`: what another policy would have done on the
/// conversation's turns, from their tapes (the owner's key; nothing is changed).
pub(crate) async fn replay_conversation(
    Client { state, caller }: Client,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ReplayBody>,
) -> Result<Json<serde_json::Value>, AppError> {
    let patch = request_policy(body.policy)?;
    owned_conversation(&state, &caller, &id).await?;
    let mut turns = stored_turns(&*state.inner.store, &id).await?;
    if let Some(only) = &body.turn {
        turns.retain(|t| &t.turn == only);
        if turns.is_empty() {
            return Err(AppError::NotFound(format!(
                "conversation `{id}` has no turn `{only}`"
            )));
        }
    }
    let mut out = Vec::with_capacity(turns.len());
    for turn in turns {
        let (replay, error) = match &turn.recording {
            Err(why) => (None, Some(why.clone())),
            Ok(recording) => {
                let policy =
                    replay_policy(recording, body.policy_from, &state.inner.policy, &patch)
                        .map_err(|e| AppError::BadRequest(e.to_string()))?;
                match replay(recording, Some(policy)).await {
                    Ok(comparison) => (Some(comparison), None),
                    Err(e) => (None, Some(e.to_string())),
                }
            }
        };
        out.push(TurnReplay {
            turn: turn.turn,
            model: turn.model,
            replay,
            error,
        });
    }
    Ok(Json(
        serde_json::json!({"object": "conversation.replay", "conversation": id, "turns": out}),
    ))
}
