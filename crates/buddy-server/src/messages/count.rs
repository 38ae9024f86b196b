//! `POST /v1/messages/count_tokens`: the request's tokens as buddy counts them when it
//! fits a history into the model's window (exact for OpenAI model families, buddy's
//! documented estimate for others).

use axum::Json;
use buddy_anthropic_wire::{CountTokensRequest, TokenCount, ToolChoice, client_tools, to_messages};
use buddy_engine::context::counter_for_model;

use crate::error::AppError;
use crate::request::{Client, JsonBody};

/// `POST /v1/messages/count_tokens`.
pub(crate) async fn count_tokens(
    _client: Client,
    JsonBody(body): JsonBody<CountTokensRequest>,
) -> Result<Json<TokenCount>, AppError> {
    let history =
        to_messages(body.system.as_ref(), &body.messages).map_err(AppError::BadRequest)?;
    let counter = counter_for_model(&body.model);
    let (tools, _) = client_tools(&body.tools);
    let tools = match body.tool_choice {
        Some(ToolChoice::None) => Vec::new(),
        _ => tools,
    };
    let messages: usize = history.messages.iter().map(|m| counter.message(m)).sum();
    let total = messages + counter.tools(&tools) + counter.reply_priming();
    Ok(Json(TokenCount {
        input_tokens: total as u64,
    }))
}
