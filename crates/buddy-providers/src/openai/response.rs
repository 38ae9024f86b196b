//! Non-streaming Chat Completions responses -> the same tokens a stream would give.

use buddy_core::{FinishReason, ProviderError, ResponseInfo, Token, Usage};
use serde::Deserialize;

use super::stream::{ToolCallPiece, describe_error};
use crate::lenient::{LenientStr, WireUsage, finish_reply};
use crate::tool_call_assembler::ToolCallAssembler;

#[derive(Deserialize)]
struct ChatResponse<'a> {
    #[serde(default, borrow)]
    id: LenientStr<'a>,
    #[serde(default, borrow)]
    model: LenientStr<'a>,
    #[serde(default, borrow)]
    choices: Vec<ResponseChoice<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ResponseChoice<'a> {
    #[serde(default, borrow)]
    message: Option<ResponseMessage<'a>>,
    #[serde(default, borrow)]
    finish_reason: LenientStr<'a>,
}

#[derive(Deserialize)]
struct ResponseMessage<'a> {
    #[serde(default, borrow)]
    content: LenientStr<'a>,
    #[serde(default, borrow)]
    refusal: LenientStr<'a>,
    #[serde(default, borrow)]
    reasoning_content: LenientStr<'a>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<ToolCallPiece<'a>>>,
}

/// Parses a whole response body into tokens.
pub fn parse_response(provider: &str, url: &str, body: &str) -> Result<Vec<Token>, ProviderError> {
    let response: ChatResponse =
        serde_json::from_str(body).map_err(|e| ProviderError::Malformed {
            provider: provider.to_owned(),
            url: url.to_owned(),
            message: format!(
                "the response is not a chat completion ({e}): {}",
                body.chars().take(200).collect::<String>()
            ),
        })?;
    if let Some(error) = response.error {
        let (message, retryable) = describe_error(&error);
        return Err(ProviderError::Stream {
            provider: provider.to_owned(),
            url: url.to_owned(),
            message,
            retryable,
        });
    }
    let choice = response
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ProviderError::Malformed {
            provider: provider.to_owned(),
            url: url.to_owned(),
            message: "the response has no choices".to_owned(),
        })?;
    let mut tokens: Vec<Token> =
        ResponseInfo::of(response.id.non_empty(), response.model.non_empty())
            .map(Token::Response)
            .into_iter()
            .collect();
    let mut assembler = ToolCallAssembler::default();
    if let Some(message) = &choice.message {
        if let Some(text) = message.reasoning_content.non_empty() {
            tokens.push(Token::Reasoning {
                text: text.to_owned(),
            });
        }
        if let Some(text) = message.content.non_empty() {
            tokens.push(Token::Text {
                text: text.to_owned(),
            });
        }
        if let Some(text) = message.refusal.non_empty() {
            tokens.push(Token::Refusal {
                text: text.to_owned(),
            });
        }
        for (i, piece) in message.tool_calls.iter().flatten().enumerate() {
            let mut delta = piece.delta();
            delta.index = Some(delta.index.unwrap_or(i as i64));
            assembler.push(delta);
        }
    }
    let (calls, _) = assembler.finish();
    let stated = choice
        .finish_reason
        .non_empty()
        .map(FinishReason::from_wire);
    finish_reply(stated, calls, response.usage.map(Usage::from), &mut tokens);
    Ok(tokens)
}
