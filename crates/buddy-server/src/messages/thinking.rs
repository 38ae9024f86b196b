//! The model's thinking in a reply to a passed-through request: the upstream's thinking
//! and `redacted_thinking` blocks, signatures and all, collected as its tokens pass, so
//! the client gets them first in its reply and can send them back as they were signed
//! (its next request reaches the upstream as its own bytes again).

use std::sync::Mutex;

use buddy_anthropic_wire::OutputBlock;
use buddy_core::Token;

/// The thinking blocks of the reply so far, not yet handed to the client.
#[derive(Debug, Default)]
pub(crate) struct Thinking(Mutex<Vec<OutputBlock>>);

impl Thinking {
    /// Takes what `token` adds: thinking text (a new block after a signed one), the
    /// signature that closes a block, or a redacted block.
    pub(crate) fn on(&self, token: &Token) {
        let Ok(mut blocks) = self.0.lock() else {
            return;
        };
        let open = match blocks.last_mut() {
            Some(OutputBlock::Thinking {
                thinking,
                signature,
            }) if signature.is_empty() => Some((thinking, signature)),
            _ => None,
        };
        match (token, open) {
            (Token::Reasoning { text }, Some((thinking, _))) => thinking.push_str(text),
            (Token::Reasoning { text }, None) => blocks.push(OutputBlock::Thinking {
                thinking: text.clone(),
                signature: String::new(),
            }),
            (Token::ReasoningSignature { signature: signed }, Some((_, signature))) => {
                signature.push_str(signed);
            }
            (Token::RedactedReasoning { data }, _) => {
                blocks.push(OutputBlock::RedactedThinking { data: data.clone() });
            }
            _ => {}
        }
    }

    /// The blocks collected so far, handed over once.
    pub(crate) fn take(&self) -> Vec<OutputBlock> {
        self.0
            .lock()
            .map(|mut blocks| std::mem::take(&mut *blocks))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_blocks_are_rebuilt_with_their_signatures() {
        let thinking = Thinking::default();
        let tokens = [
            Token::Reasoning {
                text: "Look".into(),
            },
            Token::Reasoning {
                text: " first.".into(),
            },
            Token::ReasoningSignature {
                signature: "sig1".into(),
            },
            Token::RedactedReasoning { data: "enc".into() },
            Token::Reasoning {
                text: "Then list.".into(),
            },
            Token::ReasoningSignature {
                signature: "sig2".into(),
            },
            Token::Text { text: "x".into() },
        ];
        for token in &tokens {
            thinking.on(token);
        }
        let block = |t: &str, s: &str| OutputBlock::Thinking {
            thinking: t.into(),
            signature: s.into(),
        };
        assert_eq!(
            thinking.take(),
            vec![
                block("Look first.", "sig1"),
                OutputBlock::RedactedThinking { data: "enc".into() },
                block("Then list.", "sig2"),
            ]
        );
        assert_eq!(thinking.take(), vec![], "handed over once");
    }
}
