//! Token counting: exact BPE for OpenAI model families (tiktoken's vocabularies are
//! embedded, so this works offline), a documented estimate for everything else.

use std::sync::Arc;

use buddy_core::{Message, ToolSpec};
use serde_json::Value;
use tiktoken_rs::CoreBPE;
use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};

/// Counts the tokens a request will use.
pub trait TokenCounter: Send + Sync {
    /// The encoding's name (`o200k_base`, `cl100k_base`, `estimate`).
    fn name(&self) -> &'static str;
    /// Tokens of a plain text.
    fn text(&self, text: &str) -> usize;
    /// Tokens of one message, with its framing.
    fn message(&self, message: &Message) -> usize;
    /// Tokens the tool definitions add to a request.
    fn tools(&self, tools: &[ToolSpec]) -> usize;
    /// Tokens every request adds for the model's reply to start.
    fn reply_priming(&self) -> usize {
        3
    }
}

/// Which OpenAI family a BPE counter serves; their tool framing differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// gpt-4o, gpt-4.1, o-series, gpt-5: o200k_base.
    O200k,
    /// gpt-4, gpt-3.5-turbo: cl100k_base.
    Cl100k,
}

/// Exact counts for OpenAI models, following the message and tool formulas the OpenAI
/// cookbook verified against the API ("How to count tokens with tiktoken").
pub struct BpeCounter {
    bpe: &'static CoreBPE,
    family: Family,
}

/// Framing of each message: `<|start|>{role}\n{content}<|end|>\n` (cookbook: 3 tokens).
const TOKENS_PER_MESSAGE: usize = 3;
/// A `name` field costs one more token (cookbook).
const TOKENS_PER_NAME: usize = 1;

impl BpeCounter {
    /// The o200k_base counter (gpt-4o and later).
    pub fn o200k() -> Self {
        BpeCounter {
            bpe: tiktoken_rs::o200k_base_singleton(),
            family: Family::O200k,
        }
    }

    /// The cl100k_base counter (gpt-4, gpt-3.5-turbo).
    pub fn cl100k() -> Self {
        BpeCounter {
            bpe: tiktoken_rs::cl100k_base_singleton(),
            family: Family::Cl100k,
        }
    }

    /// Tokens of a chat given as (role, name, content) parts, exactly as the cookbook
    /// counts them: 3 per message, its values, 1 per name, and 3 to prime the reply.
    pub fn chat(&self, parts: &[(&str, Option<&str>, &str)]) -> usize {
        parts
            .iter()
            .map(|(role, name, content)| {
                TOKENS_PER_MESSAGE
                    + self.text(role)
                    + self.text(content)
                    + name.map_or(0, |n| TOKENS_PER_NAME + self.text(n))
            })
            .sum::<usize>()
            + self.reply_priming()
    }

    fn property_tokens(&self, properties: &serde_json::Map<String, Value>) -> usize {
        let (enum_init, enum_item) = (3usize, 3usize);
        properties
            .iter()
            .map(|(key, property)| {
                let kind = property.get("type").and_then(Value::as_str).unwrap_or("");
                let description = property
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let description = description.strip_suffix('.').unwrap_or(description);
                let enum_tokens =
                    property
                        .get("enum")
                        .and_then(Value::as_array)
                        .map_or(0, |items| {
                            items
                                .iter()
                                .map(|item| enum_item + item.as_str().map_or(1, |s| self.text(s)))
                                .sum::<usize>()
                                .saturating_sub(enum_init)
                        });
                3 + enum_tokens + self.text(&format!("{key}:{kind}:{description}"))
            })
            .sum()
    }
}

impl TokenCounter for BpeCounter {
    fn name(&self) -> &'static str {
        match self.family {
            Family::O200k => "o200k_base",
            Family::Cl100k => "cl100k_base",
        }
    }

    fn text(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        self.bpe.encode_ordinary(text).len()
    }

    fn message(&self, message: &Message) -> usize {
        match message {
            Message::System { content } => TOKENS_PER_MESSAGE + 1 + self.text(content),
            Message::User { content } | Message::Note { content } => {
                TOKENS_PER_MESSAGE + 1 + self.text(content)
            }
            Message::Tool { content, .. } => TOKENS_PER_MESSAGE + 1 + self.text(content),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                // The API does not publish its tool-call framing; name, arguments and a
                // few tokens of structure per call is a close, slightly high estimate.
                TOKENS_PER_MESSAGE
                    + 1
                    + content.as_deref().map_or(0, |c| self.text(c))
                    + tool_calls
                        .iter()
                        .map(|c| 4 + self.text(&c.name) + self.text(&c.arguments))
                        .sum::<usize>()
            }
        }
    }

    /// The cookbook's formula (API-verified for gpt-4 and gpt-4o families).
    fn tools(&self, tools: &[ToolSpec]) -> usize {
        if tools.is_empty() {
            return 0;
        }
        let func_init = match self.family {
            Family::O200k => 7,
            Family::Cl100k => 10,
        };
        let (prop_init, func_end) = (3, 12);
        tools
            .iter()
            .map(|tool| {
                let description = tool
                    .description
                    .strip_suffix('.')
                    .unwrap_or(&tool.description);
                let properties = tool.parameters.get("properties").and_then(Value::as_object);
                func_init
                    + self.text(&format!("{}:{description}", tool.name))
                    + properties
                        .filter(|p| !p.is_empty())
                        .map_or(0, |p| prop_init + self.property_tokens(p))
            })
            .sum::<usize>()
            + func_end
    }
}

/// An estimate for models without a public tokenizer (Claude, Llama, Qwen, Mistral…):
/// one token per 3.5 characters, rounded up, plus 4 tokens of framing per message.
/// English and code run at 3.5–4.5 characters a token, so this errs on the high side,
/// which is the safe side when fitting a window.
pub struct EstimateCounter;

/// Characters per token of the estimate, times 10.
const CHARS_PER_TOKEN_X10: usize = 35;

impl TokenCounter for EstimateCounter {
    fn name(&self) -> &'static str {
        "estimate"
    }

    fn text(&self, text: &str) -> usize {
        (text.chars().count() * 10).div_ceil(CHARS_PER_TOKEN_X10)
    }

    fn message(&self, message: &Message) -> usize {
        let body = match message {
            Message::Assistant {
                content,
                tool_calls,
            } => {
                content.as_deref().map_or(0, |c| self.text(c))
                    + tool_calls
                        .iter()
                        .map(|c| 4 + self.text(&c.name) + self.text(&c.arguments))
                        .sum::<usize>()
            }
            other => other.text().map_or(0, |t| self.text(t)),
        };
        4 + body
    }

    fn tools(&self, tools: &[ToolSpec]) -> usize {
        tools
            .iter()
            .map(|t| {
                10 + self.text(&t.name)
                    + self.text(&t.description)
                    + self.text(&t.parameters.to_string())
            })
            .sum()
    }
}

/// The counter for `model`: o200k_base or cl100k_base for OpenAI model names (as
/// tiktoken maps them), the estimate otherwise.
pub fn counter_for_model(model: &str) -> Arc<dyn TokenCounter> {
    match get_tokenizer(model) {
        Some(Tokenizer::O200kBase) => Arc::new(BpeCounter::o200k()),
        Some(Tokenizer::Cl100kBase) => Arc::new(BpeCounter::cl100k()),
        _ => Arc::new(EstimateCounter),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_map_to_their_encodings() {
        assert_eq!(counter_for_model("gpt-4o-mini").name(), "o200k_base");
        assert_eq!(counter_for_model("gpt-4.1").name(), "o200k_base");
        assert_eq!(counter_for_model("gpt-4").name(), "cl100k_base");
        assert_eq!(counter_for_model("gpt-3.5-turbo").name(), "cl100k_base");
        assert_eq!(counter_for_model("claude-sonnet-4-5").name(), "estimate");
        assert_eq!(
            counter_for_model("scripted:get_time_forever").name(),
            "estimate"
        );
    }

    #[test]
    fn the_estimate_rounds_up_at_three_and_a_half_characters() {
        assert_eq!(EstimateCounter.text(""), 0);
        assert_eq!(EstimateCounter.text("abc"), 1);
        assert_eq!(EstimateCounter.text("abcdefg"), 2);
        assert_eq!(EstimateCounter.text(&"x".repeat(700)), 200);
    }
}
