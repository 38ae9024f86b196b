//! The Chat Completions request body buddy's OpenAI client sends a provider, borrowing
//! from the history (no copies). The provider decides what goes in it (its quirks);
//! this is only its shape.

use serde::Serialize;
use serde_json::Value;

use super::chat::StreamOptions;
use super::tools::{WireTool, WireToolCall};

/// A Chat Completions request as buddy sends it.
#[derive(Serialize)]
pub struct ChatBody<'a> {
    pub model: &'a str,
    pub messages: Vec<BodyMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<WireTool<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<&'static str>,
    pub stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// The output limit under its older name, which compatible servers read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The output limit under its current name, which OpenAI's reasoning and newest
    /// models require (they refuse `max_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    /// One key for every call of a conversation: OpenAI routes requests with the same
    /// key and prefix to the same prompt cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<&'a str>,
    /// How long OpenAI keeps the cached prefix (`in_memory`, `24h`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_cache_retention: Option<&'a str>,
}

/// One message of a request buddy sends, by role.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum BodyMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        /// Text, or parts when images or files come with it ([`crate::user_content_value`]).
        content: Value,
    },
    Assistant {
        /// `null` when the message only calls tools (or `""` for servers that need it).
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[cfg(test)]
mod tests {
    use buddy_core::{Attachment, Message, ResponseFormat};
    use serde_json::json;

    use super::*;
    use crate::{ChatCompletionRequest, response_format_value, to_messages, user_content_value};

    /// What buddy's client writes, buddy's server reads back as the same messages.
    #[test]
    fn a_body_buddy_sends_reads_back_as_the_same_messages() {
        let image = Attachment::Image {
            url: "https://example.com/a.png".into(),
            detail: Some("low".into()),
        };
        let format = ResponseFormat::JsonSchema {
            name: "answer".into(),
            schema: json!({"type": "object"}),
            description: None,
            strict: Some(true),
        };
        let body = ChatBody {
            model: "m",
            messages: vec![
                BodyMessage::System {
                    content: "Be brief.",
                },
                BodyMessage::User {
                    content: user_content_value("Look:", std::slice::from_ref(&image)),
                },
                BodyMessage::Assistant {
                    content: None,
                    tool_calls: vec![WireToolCall::function("c1", "lookup", "{\"q\":1}")],
                },
                BodyMessage::Tool {
                    tool_call_id: "c1",
                    content: "found",
                },
            ],
            tools: None,
            tool_choice: None,
            stream: true,
            stream_options: Some(StreamOptions {
                include_usage: true,
            }),
            max_tokens: None,
            max_completion_tokens: Some(9),
            temperature: None,
            top_p: None,
            seed: None,
            stop: &[],
            response_format: Some(response_format_value(&format)),
            prompt_cache_key: Some("conv-1"),
            prompt_cache_retention: None,
        };
        let text = serde_json::to_string(&body).unwrap();
        let read: ChatCompletionRequest = serde_json::from_str(&text).unwrap();
        assert_eq!(read.prompt_cache_key.as_deref(), Some("conv-1"));
        let sampling = read.sampling().unwrap();
        assert_eq!(sampling.response_format, Some(format));
        assert_eq!(sampling.max_output_tokens, Some(9));
        assert!(read.stream_options.is_some_and(|o| o.include_usage));
        assert_eq!(
            to_messages(read.messages).unwrap(),
            vec![
                Message::system("Be brief."),
                Message::user_with("Look:", vec![image]),
                Message::Assistant {
                    content: None,
                    tool_calls: vec![buddy_core::ToolCall::new("c1", "lookup", "{\"q\":1}")],
                },
                Message::tool_result("c1", "found", false),
            ]
        );
    }
}
