//! The scripted model: a deterministic, stateless [`Provider`] driven by a JSON
//! [`Scenario`].
//!
//! Each request is answered by the first rule whose conditions match what the request
//! contains (tools offered, tool results so far, the last result, whether there is a
//! user message at all), so the same conversation always gets the same reply.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use buddy_core::{
    BoxFuture, CompletionRequest, FinishReason, Provider, ProviderError, Token, TokenStream, Usage,
};

use crate::render;
use crate::scenario::Scenario;

/// A [`Provider`] that answers from a scenario's rules.
#[derive(Debug)]
pub struct ScriptedProvider {
    scenario: Arc<Scenario>,
    /// Numbers the replies, so call ids stay unique even when the model sees a trimmed history.
    replies: AtomicUsize,
}

impl ScriptedProvider {
    /// A scripted model playing `scenario`.
    pub fn new(scenario: Arc<Scenario>) -> Self {
        ScriptedProvider {
            scenario,
            replies: AtomicUsize::new(0),
        }
    }

    /// The scenario it plays.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    /// The script decides the reply: every setting is accepted (and has no effect).
    fn unsupported(&self, _: &buddy_core::Sampling) -> Option<String> {
        None
    }

    /// The script reads only text: attachments are accepted and not looked at.
    fn refuses(&self, _: &buddy_core::Attachment) -> Option<String> {
        None
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        Box::pin(async move {
            let reply_number = self.replies.fetch_add(1, Ordering::Relaxed) + 1;
            let reply = render::respond(&self.scenario, &request, reply_number)?;
            if let Some((status, message)) = reply.error {
                return Err(ProviderError::Http {
                    provider: "scripted".into(),
                    url: format!("scripted model `{}`", self.scenario.name),
                    status,
                    message,
                    retry_after: None,
                });
            }
            let input_chars: usize = request
                .messages
                .iter()
                .map(|m| m.text().map_or(0, str::len))
                .sum();
            let mut output_chars = reply.text.len();
            let mut tokens: Vec<Result<Token, ProviderError>> = Vec::new();
            let chunk = self.scenario.chunk_chars.max(1);
            let chars: Vec<char> = reply.text.chars().collect();
            for piece in chars.chunks(chunk) {
                tokens.push(Ok(Token::Text {
                    text: piece.iter().collect(),
                }));
            }
            for call in reply.tool_calls {
                output_chars += call.name.len() + call.arguments.len();
                tokens.push(Ok(Token::ToolCall(call)));
            }
            let usage = Usage {
                input_tokens: u64::try_from(input_chars.div_ceil(4)).unwrap_or(u64::MAX),
                output_tokens: u64::try_from(output_chars.div_ceil(4)).unwrap_or(u64::MAX),
                ..Usage::default()
            };
            tokens.push(Ok(Token::Finish {
                reason: reply.finish.unwrap_or(FinishReason::Stop),
                usage: Some(usage),
            }));
            Ok(Box::pin(futures::stream::iter(tokens)) as TokenStream)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use buddy_core::{Message, Skill, SkillContext};
    use futures::StreamExt;

    #[tokio::test]
    async fn replies_stream_in_small_chunks_and_end_with_usage() {
        let scenario = Scenario::parse(
            r#"{"name":"s","prompt":"p","chunk_chars":4,
                "tools":[{"name":"pages","results":["first",{"error":"gone {call}"}]}],
                "expect":{"stop_reason":"completed","model_calls":1,"tool_calls":0},
                "rules":[{"reply":{"text":"Hello world"}}]}"#,
            "test",
        )
        .unwrap();
        let provider = ScriptedProvider::new(Arc::new(scenario.clone()));
        let history = [Message::user("hi")];
        let tokens: Vec<Token> = provider
            .stream(CompletionRequest::new("m", &history))
            .await
            .unwrap()
            .map(|t| t.unwrap())
            .collect()
            .await;
        let texts: Vec<String> = tokens
            .iter()
            .filter_map(|t| match t {
                Token::Text { text } => Some(text.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, vec!["Hell", "o wo", "rld"]);
        assert!(matches!(
            tokens.last(),
            Some(Token::Finish { reason: FinishReason::Stop, usage: Some(u) }) if u.output_tokens == 3
        ));

        let stub = &scenario.stub_skills()[0];
        let ctx = SkillContext::default;
        assert_eq!(
            stub.execute(serde_json::json!({}), ctx()).await.unwrap(),
            "first"
        );
        let err = stub
            .execute(serde_json::json!({}), ctx())
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "gone 2");
        let err = stub
            .execute(serde_json::json!({}), ctx())
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "gone 3", "the last result repeats");
    }
}
