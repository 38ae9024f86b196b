//! Non-streaming Messages responses -> the same tokens a stream would give.

use buddy_core::{FinishReason, ProviderError, ResponseInfo, Token, ToolCall, Usage};
use serde::Deserialize;

use super::stream::ContentBlock;
use crate::lenient::{LenientStr, WireUsage, finish_reply};

#[derive(Deserialize)]
struct MessageResponse<'a> {
    #[serde(default, borrow)]
    id: LenientStr<'a>,
    #[serde(default, borrow)]
    model: LenientStr<'a>,
    #[serde(default, borrow)]
    content: Vec<ContentBlock<'a>>,
    #[serde(default, borrow)]
    stop_reason: LenientStr<'a>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

/// Parses a whole response body into tokens.
pub fn parse_response(provider: &str, url: &str, body: &str) -> Result<Vec<Token>, ProviderError> {
    let response: MessageResponse =
        serde_json::from_str(body).map_err(|e| ProviderError::Malformed {
            provider: provider.to_owned(),
            url: url.to_owned(),
            message: format!(
                "the response is not a message ({e}): {}",
                body.chars().take(200).collect::<String>()
            ),
        })?;
    if let Some(error) = response.error {
        let kind = error
            .get("type")
            .and_then(|t| t.as_str())
            .unwrap_or("error")
            .to_owned();
        let message = error
            .get("message")
            .and_then(|m| m.as_str())
            .unwrap_or("unknown error");
        return Err(ProviderError::Stream {
            provider: provider.to_owned(),
            url: url.to_owned(),
            message: format!("{message} ({kind})"),
            retryable: kind == "overloaded_error" || kind == "api_error",
        });
    }
    let mut tokens: Vec<Token> =
        ResponseInfo::of(response.id.non_empty(), response.model.non_empty())
            .map(Token::Response)
            .into_iter()
            .collect();
    let mut calls = Vec::new();
    for block in &response.content {
        match block.kind.non_empty().unwrap_or("") {
            "text" => {
                if let Some(text) = block.text.non_empty() {
                    tokens.push(Token::Text {
                        text: text.to_owned(),
                    });
                }
            }
            "thinking" => {
                if let Some(text) = block.thinking.non_empty() {
                    tokens.push(Token::Reasoning {
                        text: text.to_owned(),
                    });
                }
                if let Some(signature) = block.signature.non_empty() {
                    tokens.push(Token::ReasoningSignature {
                        signature: signature.to_owned(),
                    });
                }
            }
            "redacted_thinking" => {
                if let Some(data) = block.data.non_empty() {
                    tokens.push(Token::RedactedReasoning {
                        data: data.to_owned(),
                    });
                }
            }
            "tool_use" => {
                let arguments = block
                    .input
                    .as_ref()
                    .map_or_else(|| "{}".to_owned(), |v| v.to_string());
                calls.push(ToolCall::new(
                    block.id.non_empty().unwrap_or_default(),
                    block.name.non_empty().unwrap_or_default(),
                    arguments,
                ));
            }
            _ => {}
        }
    }
    let stated = response
        .stop_reason
        .non_empty()
        .map(FinishReason::from_wire);
    finish_reply(stated, calls, response.usage.map(Usage::from), &mut tokens);
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_keeps_its_signature_and_a_redacted_block_its_data() {
        let body = r#"{"id": "msg_1", "model": "m", "content": [
            {"type": "thinking", "thinking": "Check.", "signature": "EqQBsig=="},
            {"type": "redacted_thinking", "data": "EmwKAhgB"},
            {"type": "text", "text": "Done."}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 2}}"#;
        let tokens = parse_response("anthropic", "http://x", body).unwrap();
        let thinking: Vec<&Token> = tokens
            .iter()
            .filter(|t| {
                matches!(
                    t,
                    Token::Reasoning { .. }
                        | Token::ReasoningSignature { .. }
                        | Token::RedactedReasoning { .. }
                )
            })
            .collect();
        assert_eq!(
            thinking,
            [
                &Token::Reasoning {
                    text: "Check.".into()
                },
                &Token::ReasoningSignature {
                    signature: "EqQBsig==".into()
                },
                &Token::RedactedReasoning {
                    data: "EmwKAhgB".into()
                },
            ]
        );
    }
}
