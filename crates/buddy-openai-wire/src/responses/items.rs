//! The items of `input` and `output`: the same `Item` is read from one and written to the other.

use buddy_core::Arguments;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// An item of a request's `input` or a response's `output`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Item {
    #[serde(rename = "message")]
    Message(MessageItem),
    #[serde(rename = "function_call")]
    FunctionCall(FunctionCallItem),
    #[serde(rename = "function_call_output")]
    FunctionCallOutput(FunctionCallOutputItem),
    /// A call of one of the client's custom (free-form) tools: its input is text.
    #[serde(rename = "custom_tool_call")]
    CustomToolCall(CustomToolCallItem),
    /// The client's result of a custom tool call.
    #[serde(rename = "custom_tool_call_output")]
    CustomToolCallOutput(FunctionCallOutputItem),
    /// A call buddy ran itself, in the API's MCP shape (`server_label: "buddy"`).
    #[serde(rename = "mcp_call")]
    McpCall(SkillCallItem),
    /// A call buddy ran itself, in buddy's extension shape (with its `call_id`).
    #[serde(rename = "buddy:skill_call")]
    SkillCall(SkillCallItem),
    /// The model's reasoning summaries: the provider's business, read and dropped.
    #[serde(rename = "reasoning")]
    Reasoning(OtherFields),
    /// A conversation compacted by `/v1/responses/compact`: its summary, sealed.
    #[serde(rename = "compaction")]
    Compaction(CompactionItem),
    /// An item the server made earlier, by id (the Vercel AI SDK sends these).
    #[serde(rename = "item_reference")]
    ItemReference(ItemReference),
}

/// Where an item stands (output items are `completed`, or `in_progress` while streamed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    InProgress,
    Completed,
    Incomplete,
}

/// What an assistant message is (Open Responses): narration before tool calls, or the
/// answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Commentary,
    FinalAnswer,
}

/// A message: the user's, the instructions', or the assistant's text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ItemStatus>,
    pub role: String,
    /// A string or content parts (read by [`user_content`], shared with Chat Completions).
    #[serde(default)]
    pub content: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
}

impl MessageItem {
    /// An assistant message of one `output_text` part, as a response writes it.
    pub fn assistant(id: String, status: ItemStatus, parts: Vec<OutputText>) -> Self {
        MessageItem {
            id: Some(id),
            status: Some(status),
            role: "assistant".into(),
            content: json!(parts),
            phase: None,
        }
    }

    /// A user message of one `input_text` part.
    pub fn user(id: String, text: &str) -> Self {
        MessageItem {
            id: Some(id),
            status: Some(ItemStatus::Completed),
            role: "user".into(),
            content: json!([{"type": "input_text", "text": text}]),
            phase: None,
        }
    }
}

/// A response's text part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "output_text")]
pub struct OutputText {
    pub text: String,
    #[serde(default)]
    pub annotations: Vec<Value>,
    /// Always there, as OpenAI's schema requires (`[]`: buddy asks for none).
    #[serde(default)]
    pub logprobs: Vec<Value>,
}

impl OutputText {
    /// A part of `text`, without annotations.
    pub fn new(text: impl Into<String>) -> Self {
        OutputText {
            text: text.into(),
            annotations: Vec::new(),
            logprobs: Vec::new(),
        }
    }
}

/// A call of one of the client's function tools.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub call_id: String,
    pub name: String,
    /// The `namespace` tool the function belongs to (codex's namespaced tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub arguments: Arguments,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ItemStatus>,
}

/// A call of one of the client's custom tools, with its free-form `input`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CustomToolCallItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub call_id: String,
    pub name: String,
    pub input: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ItemStatus>,
}

/// The client's result of a function call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallOutputItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub call_id: String,
    /// A string or content parts.
    #[serde(default)]
    pub output: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ItemStatus>,
}

/// A skill call buddy ran, with its result: `output` or `error`, the other null.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SkillCallItem {
    pub id: String,
    /// The call's id (buddy's extension shape; the MCP shape derives it from `id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_label: Option<String>,
    pub name: String,
    pub arguments: Arguments,
    #[serde(default)]
    pub output: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ItemStatus>,
}

/// A compacted conversation's summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactionItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub encrypted_content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
}

/// A reference to an earlier output item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ItemReference {
    pub id: String,
}

/// An item's fields, kept as they came.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OtherFields {
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl Item {
    /// The item's id, when it has one.
    pub fn id(&self) -> Option<&str> {
        match self {
            Item::Message(m) => m.id.as_deref(),
            Item::FunctionCall(c) => c.id.as_deref(),
            Item::FunctionCallOutput(o) | Item::CustomToolCallOutput(o) => o.id.as_deref(),
            Item::CustomToolCall(c) => c.id.as_deref(),
            Item::McpCall(c) | Item::SkillCall(c) => Some(&c.id),
            Item::Compaction(c) => c.id.as_deref(),
            Item::ItemReference(r) => Some(&r.id),
            Item::Reasoning(r) => r.fields.get("id").and_then(Value::as_str),
        }
    }
}
