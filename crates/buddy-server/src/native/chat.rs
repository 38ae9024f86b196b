//! `POST /v1/chat`: one turn of a stored conversation, streamed as SSE.

use axum::extract::Path;
use axum::response::Response;
use buddy_engine::{CallDecision, Resume};
use serde::Deserialize;
use serde_json::json;

use crate::conversation_settings::ConversationSettings;
use crate::error::AppError;
use crate::request::{JsonBody, request_policy};
use crate::request_mcp::RequestMcp;
use crate::sse;
use crate::turn::watch::Numbered;
use crate::turn::{
    Conversation, ModelAsk, Settings, StartedTurn, ToolAsk, TurnSpec, Turns, frames,
};

/// The body of `POST /v1/chat`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChatBody {
    conversation_id: Option<String>,
    message: String,
    provider: Option<String>,
    model: Option<String>,
    policy: Option<serde_json::Value>,
    /// MCP servers for this turn (when the operator allows it).
    #[serde(default)]
    mcp: Vec<RequestMcp>,
    /// Sub-agents for this turn, declared like buddy.toml's `[[agents]]` (checked here,
    /// so a bad one is a 400 naming `agents[i]`).
    #[serde(default)]
    agents: Vec<serde_json::Value>,
    /// Sampling and output settings (temperature, top_p, max_output_tokens, seed, stop,
    /// response_format).
    #[serde(default)]
    sampling: buddy_core::Sampling,
    /// The conversation's own system prompt and policy, kept for this and later turns.
    settings: Option<serde_json::Value>,
}

pub(crate) async fn chat(
    turns: Turns,
    JsonBody(body): JsonBody<ChatBody>,
) -> Result<Response, AppError> {
    if body.message.trim().is_empty() {
        return Err(AppError::BadRequest(
            "`message` is empty; send what the user said".into(),
        ));
    }
    let policy = request_policy(body.policy)?;
    let new_settings = body.settings.map(ConversationSettings::parse).transpose()?;
    let model = ModelAsk {
        provider: body.provider,
        model: body.model,
    };
    let conversation = Conversation::Stored(body.conversation_id);
    let turn = turns
        .start(TurnSpec {
            user_message: Some(body.message),
            sampling: body.sampling,
            settings: Settings::Kept(new_settings.map(Box::new)),
            tools: ToolAsk {
                mcp: body.mcp,
                agents: body.agents,
                ..ToolAsk::default()
            },
            ..TurnSpec::new(conversation, model, policy)
        })
        .await?;
    Ok(sse_turn(&turns, turn))
}

/// The body of `POST /v1/conversations/{id}/resume`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumeBody {
    /// A decision per call waiting for approval.
    #[serde(default)]
    decisions: Option<Vec<CallDecision>>,
    /// Continue a turn that stopped at a limit, with a fresh budget.
    #[serde(default, rename = "continue")]
    go_on: bool,
    policy: Option<serde_json::Value>,
    /// The MCP servers the paused turn had, so its waiting calls can run.
    #[serde(default)]
    mcp: Vec<RequestMcp>,
    /// The sub-agents the paused turn had, so a waiting call to one can run.
    #[serde(default)]
    agents: Vec<serde_json::Value>,
}

/// `POST /v1/conversations/{id}/resume`: goes on with a turn paused for approval (a
/// decision per waiting call) or stopped at a limit (`"continue": true`), streamed as SSE
/// like `/v1/chat`.
pub(crate) async fn resume(
    turns: Turns,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ResumeBody>,
) -> Result<Response, AppError> {
    let resume = match (body.decisions, body.go_on) {
        (Some(decisions), false) if !decisions.is_empty() => Resume::Decisions(decisions),
        (None, true) => Resume::Continue,
        _ => {
            return Err(AppError::BadRequest(
                "send either `decisions` (one per call waiting for approval: {\"call_id\": …, \"decision\": \
                 \"approve\" | \"reject\" | \"edit\"}) or `\"continue\": true` (for a turn stopped at a limit)"
                    .into(),
            ));
        }
    };
    let policy = request_policy(body.policy)?;
    let conversation = Conversation::Stored(Some(id));
    let turn = turns
        .start(TurnSpec {
            resume: Some(resume),
            settings: Settings::Kept(None),
            tools: ToolAsk {
                mcp: body.mcp,
                agents: body.agents,
                ..ToolAsk::default()
            },
            ..TurnSpec::new(conversation, ModelAsk::default(), policy)
        })
        .await?;
    Ok(sse_turn(&turns, turn))
}

/// Streams a started turn as SSE: a `conversation` event first, then every ChatEvent
/// with its number (`id:`), from which `GET /v1/turns/{id}/events` picks up again.
fn sse_turn(turns: &Turns, turn: StartedTurn) -> Response {
    let opening = sse::json_frame(
        Some("conversation"),
        &json!({"conversation_id": turn.conversation_id, "turn_id": turn.turn_id, "model": turn.model}),
    );
    let encoder = Numbered {
        opening: Some(opening),
    };
    let guard = turns.disconnect_guard(turn.cancel);
    sse::respond(frames(turn.events, encoder, guard))
}
