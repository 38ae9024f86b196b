//! Lenient pieces of provider wire formats: compatible servers put odd things where a
//! string should be, and one odd field must not cost the whole chunk.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A string if the value is one; anything else (null, objects, numbers) reads as `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LenientStr<'a>(pub Option<Cow<'a, str>>);

impl<'a> LenientStr<'a> {
    /// The text, if it is a non-empty string.
    pub fn non_empty(&self) -> Option<&str> {
        self.0.as_deref().filter(|s| !s.is_empty())
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for LenientStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LenientStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or anything else")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(LenientStr(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(LenientStr(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(LenientStr(Some(Cow::Owned(v))))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(LenientStr(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(LenientStr(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(V)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(LenientStr(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(LenientStr(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(LenientStr(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(LenientStr(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(LenientStr(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(LenientStr(None))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// Tool-call arguments: normally JSON text, but some servers send the object itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Arguments<'a> {
    Text(Cow<'a, str>),
    Json(String),
}

impl Arguments<'_> {
    pub fn as_str(&self) -> &str {
        match self {
            Arguments::Text(t) => t,
            Arguments::Json(j) => j,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Arguments<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Arguments<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("tool-call arguments as a JSON string or object")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Owned(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Borrowed("")))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let value =
                    serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Arguments::Json(value.to_string()))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// The tokens that end every reply: its tool calls — none when the output was cut by
/// the token limit, since they may be half-written — then exactly one finish. A missing
/// finish reason is inferred from whether there are calls.
pub(crate) fn finish_reply(
    stated: Option<buddy_core::FinishReason>,
    calls: Vec<buddy_core::ToolCall>,
    usage: Option<buddy_core::Usage>,
    out: &mut impl Extend<buddy_core::Token>,
) {
    use buddy_core::{FinishReason, Token};
    let reason = stated.unwrap_or(if calls.is_empty() {
        FinishReason::Stop
    } else {
        FinishReason::ToolCalls
    });
    if reason == FinishReason::Length {
        if !calls.is_empty() {
            tracing::warn!(
                dropped = calls.len(),
                "output cut by the token limit: its tool calls are not run"
            );
        }
    } else {
        out.extend(calls.into_iter().map(Token::ToolCall));
    }
    out.extend([Token::Finish { reason, usage }]);
}

impl WireUsage {
    /// All input tokens: Anthropic counts cache writes and reads apart from `input_tokens`.
    pub fn input(&self) -> Option<u64> {
        let cached = self.written() + self.cache_read_input_tokens.unwrap_or(0);
        self.prompt_tokens.map(|n| n + cached)
    }

    /// The input tokens read from the prompt cache: Anthropic's `cache_read_input_tokens`,
    /// OpenAI's `prompt_tokens_details.cached_tokens`.
    pub fn cached(&self) -> u64 {
        self.cache_read_input_tokens
            .or(self.prompt_tokens_details.and_then(|d| d.cached_tokens))
            .unwrap_or(0)
    }

    /// The input tokens written to the prompt cache (Anthropic's
    /// `cache_creation_input_tokens`, else the sum of its `cache_creation` breakdown).
    pub fn written(&self) -> u64 {
        let breakdown = self.cache_creation.map(|c| {
            c.ephemeral_5m_input_tokens.unwrap_or(0) + c.ephemeral_1h_input_tokens.unwrap_or(0)
        });
        self.cache_creation_input_tokens.or(breakdown).unwrap_or(0)
    }

    /// The part of [`WireUsage::written`] written for an hour
    /// (`cache_creation.ephemeral_1h_input_tokens`).
    pub fn written_1h(&self) -> u64 {
        self.cache_creation
            .and_then(|c| c.ephemeral_1h_input_tokens)
            .unwrap_or(0)
    }

    /// All output tokens. Some OpenAI-compatible servers (xAI) leave reasoning tokens out
    /// of `completion_tokens` and report them in `completion_tokens_details`; OpenAI
    /// counts them in. `total_tokens` tells which: they are added only when the total
    /// includes them on top.
    pub fn output(&self) -> Option<u64> {
        let completion = self.completion_tokens?;
        let reasoning = self
            .completion_tokens_details
            .and_then(|d| d.reasoning_tokens)
            .unwrap_or(0);
        let apart = reasoning > 0
            && self.total_tokens.is_some_and(|total| {
                total == self.prompt_tokens.unwrap_or(0) + completion + reasoning
            });
        Some(if apart {
            completion + reasoning
        } else {
            completion
        })
    }
}

impl From<WireUsage> for buddy_core::Usage {
    fn from(usage: WireUsage) -> Self {
        buddy_core::Usage {
            input_tokens: usage.input().unwrap_or(0),
            output_tokens: usage.output().unwrap_or(0),
            cached_input_tokens: usage.cached(),
            cache_write_tokens: usage.written(),
            cache_write_1h_tokens: usage.written_1h(),
        }
    }
}

/// Token counts under either naming (`prompt_tokens` or `input_tokens`).
#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default, alias = "input_tokens")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, alias = "output_tokens")]
    pub completion_tokens: Option<u64>,
    #[serde(default)]
    pub total_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionDetails>,
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_creation: Option<CacheCreation>,
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptDetails>,
}

/// `usage.cache_creation` of Anthropic: the cache writes by lifetime.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub(crate) struct CacheCreation {
    #[serde(default)]
    pub ephemeral_5m_input_tokens: Option<u64>,
    #[serde(default)]
    pub ephemeral_1h_input_tokens: Option<u64>,
}

/// `usage.prompt_tokens_details` of OpenAI.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub(crate) struct PromptDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// `usage.completion_tokens_details` of OpenAI-compatible servers.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub(crate) struct CompletionDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Probe<'a> {
        #[serde(default, borrow)]
        a: LenientStr<'a>,
        #[serde(default, borrow)]
        b: Option<Arguments<'a>>,
    }

    #[test]
    fn usage_counts_reasoning_and_cache_tokens_once() {
        let usage =
            |json: &str| buddy_core::Usage::from(serde_json::from_str::<WireUsage>(json).unwrap());
        // OpenAI: reasoning is part of completion_tokens (total says so).
        let openai = usage(
            r#"{"prompt_tokens":10,"completion_tokens":250,"total_tokens":260,"completion_tokens_details":{"reasoning_tokens":196}}"#,
        );
        assert_eq!((openai.input_tokens, openai.output_tokens), (10, 250));
        // xAI: reasoning reported apart; the total includes it.
        let xai = usage(
            r#"{"prompt_tokens":10,"completion_tokens":54,"total_tokens":260,"completion_tokens_details":{"reasoning_tokens":196}}"#,
        );
        assert_eq!((xai.input_tokens, xai.output_tokens), (10, 250));
        // Anthropic: cache writes and reads are input too.
        let anthropic = usage(
            r#"{"input_tokens":12,"cache_creation_input_tokens":300,"cache_read_input_tokens":1000,"output_tokens":5}"#,
        );
        assert_eq!((anthropic.input_tokens, anthropic.output_tokens), (1312, 5));
        assert_eq!(anthropic.cached_input_tokens, 1000);
        assert_eq!(anthropic.cache_write_tokens, 300);
        // The breakdown by lifetime: one-hour writes are a part of the writes.
        let by_ttl = usage(
            r#"{"input_tokens":12,"cache_creation_input_tokens":300,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":200},"output_tokens":5}"#,
        );
        assert_eq!(
            (
                by_ttl.input_tokens,
                by_ttl.cache_write_tokens,
                by_ttl.cache_write_1h_tokens
            ),
            (312, 300, 200)
        );
        // Only the breakdown (a compatible server): its sum is the writes.
        let only = usage(
            r#"{"input_tokens":1,"cache_creation":{"ephemeral_5m_input_tokens":40,"ephemeral_1h_input_tokens":2},"output_tokens":5}"#,
        );
        assert_eq!(
            (only.cache_write_tokens, only.cache_write_1h_tokens),
            (42, 2)
        );
        // OpenAI: cached tokens are part of prompt_tokens.
        let cached = usage(
            r#"{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":{"cached_tokens":1920}}"#,
        );
        assert_eq!(
            (cached.input_tokens, cached.cached_input_tokens),
            (2006, 1920)
        );
        assert_eq!(openai.cached_input_tokens, 0);
    }

    #[test]
    fn odd_values_do_not_break_the_chunk() {
        let p: Probe = serde_json::from_str(r#"{"a": {"x": [1, 2]}, "b": {"k": "v"}}"#).unwrap();
        assert_eq!(p.a, LenientStr(None));
        assert_eq!(p.b, Some(Arguments::Json(r#"{"k":"v"}"#.into())));
        let p: Probe = serde_json::from_str(r#"{"a": "hi", "b": "{\"k\""}"#).unwrap();
        assert_eq!(p.a.non_empty(), Some("hi"));
        assert_eq!(p.b.unwrap().as_str(), "{\"k\"");
        let p: Probe = serde_json::from_str(r#"{"a": null}"#).unwrap();
        assert_eq!(p.a.non_empty(), None);
    }
}
