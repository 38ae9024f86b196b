//! The request as clients send it: `POST /v1/messages` and `/v1/messages/count_tokens`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A Messages API request. Fields buddy does not know are kept in `extra`.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct MessagesRequest {
    pub model: String,
    pub messages: Vec<InputMessage>,
    /// Required by Anthropic; the most tokens one reply may have.
    pub max_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemPrompt>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    /// `{"user_id": …}`: who the request is for (an opaque id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingConfig>,
    /// buddy's own extension: policy overrides for this request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buddy_policy: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `count_tokens` request: a Messages request without `max_tokens` and sampling.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct CountTokensRequest {
    pub model: String,
    pub messages: Vec<InputMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemPrompt>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingConfig>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `system`: a string, or text blocks (which may carry cache marks).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum SystemPrompt {
    Text(String),
    Blocks(Vec<SystemBlock>),
}

impl SystemPrompt {
    /// The whole prompt as one text (blocks joined by a blank line).
    pub fn text(&self) -> String {
        match self {
            SystemPrompt::Text(text) => text.clone(),
            SystemPrompt::Blocks(blocks) => blocks
                .iter()
                .map(|b| b.text.as_str())
                .collect::<Vec<_>>()
                .join("\n\n"),
        }
    }
}

/// One text block of `system`.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct SystemBlock {
    #[serde(rename = "type", default = "text_type")]
    pub kind: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn text_type() -> String {
    "text".into()
}

/// A prompt-cache breakpoint a client put on a block (`{"type": "ephemeral", "ttl": "1h"}`).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct CacheControl {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
}

/// One message of `messages`.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct InputMessage {
    /// `user` or `assistant`.
    pub role: String,
    pub content: MessageContent,
}

/// A message's content: a string, or content blocks.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

/// A content block: one buddy knows, or any other kept whole.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ContentBlock {
    Known(KnownBlock),
    /// A block of a type buddy does not know (or a known type it could not read).
    Other(Value),
}

/// The content blocks buddy reads.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum KnownBlock {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    Image {
        source: BlockSource,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Document {
        source: BlockSource,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<ToolResultContent>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
}

/// Where an image's or a document's bytes are.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockSource {
    Base64 {
        media_type: String,
        data: String,
    },
    Url {
        url: String,
    },
    /// A plain-text document.
    Text {
        media_type: String,
        data: String,
    },
    /// Anything else (`file`, `content`), kept whole.
    #[serde(untagged)]
    Other(Value),
}

/// A tool result's content: a string, or blocks (text and images).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

/// A tool the client declares: a custom tool with `input_schema`, or one of Anthropic's
/// own (`type` such as `web_search_20250305`, `bash_20250124`), kept in `extra`.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ToolDef {
    pub name: String,
    /// `custom` (or absent) for a client tool; another value names a tool Anthropic runs
    /// or defines itself.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ToolDef {
    /// True for a tool the client defines and runs (`type` absent or `custom`).
    pub fn is_custom(&self) -> bool {
        self.kind.as_deref().is_none_or(|k| k == "custom")
    }
}

/// `tool_choice`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolChoice {
    Auto {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        disable_parallel_tool_use: bool,
    },
    Any {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        disable_parallel_tool_use: bool,
    },
    Tool {
        name: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        disable_parallel_tool_use: bool,
    },
    None,
}

/// `thinking`: extended thinking on (with its token budget), off, or adaptive.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ThinkingConfig {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u32>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_claude_code_shaped_request_is_read_and_keeps_what_buddy_does_not_know() {
        let body = json!({
            "model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": true,
            "system": [{"type": "text", "text": "You are Claude Code.",
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "list files",
                    "cache_control": {"type": "ephemeral", "ttl": "1h"}}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "ls", "signature": "sig=="},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "a.txt"}], "is_error": false},
                    {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}}]}
            ],
            "tools": [{"name": "Bash", "description": "Run", "input_schema": {"type": "object"}},
                      {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "metadata": {"user_id": "u1"},
            "context_management": {"edits": []}
        });
        let request: MessagesRequest = serde_json::from_value(body).unwrap();
        assert!(request.extra.contains_key("context_management"));
        assert_eq!(
            request.tool_choice,
            Some(ToolChoice::Auto {
                disable_parallel_tool_use: true
            })
        );
        assert!(request.tools[0].is_custom() && !request.tools[1].is_custom());
        assert_eq!(request.tools[1].extra["max_uses"], 5);
        let MessageContent::Blocks(last) = &request.messages[2].content else {
            panic!("blocks expected");
        };
        assert!(matches!(
            last[0],
            ContentBlock::Known(KnownBlock::ToolResult { .. })
        ));
        assert!(matches!(&last[1], ContentBlock::Other(v) if v["type"] == "server_tool_use"));
        let Some(SystemPrompt::Blocks(system)) = &request.system else {
            panic!("system blocks expected");
        };
        assert_eq!(system[0].cache_control.as_ref().unwrap().kind, "ephemeral");
        // Written back, what buddy did not know is still there.
        let again = serde_json::to_value(&request).unwrap();
        assert_eq!(again["context_management"], json!({"edits": []}));
        assert_eq!(
            again["messages"][0]["content"][0]["cache_control"]["ttl"],
            "1h"
        );
        assert_eq!(again["messages"][1]["content"][0]["signature"], "sig==");
    }

    #[test]
    fn a_request_without_its_required_fields_is_refused() {
        let missing_max = json!({"model": "m", "messages": []});
        assert!(serde_json::from_value::<MessagesRequest>(missing_max).is_err());
        let bad_choice = json!({"model": "m", "max_tokens": 1, "messages": [],
            "tool_choice": {"type": "sometimes"}});
        assert!(serde_json::from_value::<MessagesRequest>(bad_choice).is_err());
    }
}
