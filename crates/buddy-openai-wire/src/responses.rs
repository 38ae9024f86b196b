//! The Responses API typed: the items of `input` and `output`, function tools, the
//! response object and its stream events, and the translation of input items into
//! buddy's messages. The same `Item` is read from `input` and written to `output`, so an
//! item a client sends back (as itself or, for the server, by reference) reads as it was
//! written.

use buddy_core::{Arguments, Message, ResponseFormat, ToolCall, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::content::{text_of, user_content};
use super::details::BuddyDetails;

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

/// The item types `input` may hold, by their wire names.
const INPUT_KINDS: [&str; 10] = [
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "mcp_call",
    "buddy:skill_call",
    "reasoning",
    "compaction",
    "item_reference",
];

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

/// `input`'s items: a string is one user message, null none; or what is wrong with an
/// item, by its index and the field it lacks.
pub fn input_items(input: Value) -> Result<Vec<Item>, String> {
    let items = match input {
        Value::Null => return Ok(Vec::new()),
        Value::String(text) => {
            return Ok(vec![Item::Message(MessageItem {
                id: None,
                status: None,
                role: "user".into(),
                content: Value::String(text),
                phase: None,
            })]);
        }
        Value::Array(items) => items,
        other => {
            return Err(format!(
                "`input` must be a string or a list of items, got {other}"
            ));
        }
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| input_item(i, item))
        .collect()
}

/// One item of `input`; one without a `type` is a message.
fn input_item(i: usize, mut item: Value) -> Result<Item, String> {
    let Some(object) = item.as_object_mut() else {
        return Err(format!("input[{i}] must be an object, got {item}"));
    };
    let kind = match object.get("type") {
        None | Some(Value::Null) => "message".to_owned(),
        Some(Value::String(kind)) => kind.clone(),
        Some(other) => return Err(format!("input[{i}]: `type` must be a string, got {other}")),
    };
    if !INPUT_KINDS.contains(&kind.as_str()) {
        return Err(format!(
            "input[{i}]: items of type `{kind}` are not supported; buddy takes message, function_call, function_call_output, custom_tool_call(_output), reasoning and compaction items"
        ));
    }
    object.insert("type".into(), Value::String(kind.clone()));
    serde_json::from_value(item).map_err(|e| {
        let e = e.to_string();
        match e.strip_prefix("missing field ") {
            Some(field) => format!("input[{i}]: a `{kind}` item needs {field}"),
            None => format!("input[{i}]: a `{kind}` item is malformed: {e}"),
        }
    })
}

/// buddy's messages for input items (references already resolved: one left is refused);
/// `compaction` reads a compaction item's sealed summary.
pub fn items_to_messages(
    items: Vec<Item>,
    compaction: impl Fn(&str) -> Result<Message, String>,
) -> Result<Vec<Message>, String> {
    let mut messages: Vec<Message> = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        match item {
            Item::Message(message) => messages.push(match message.role.as_str() {
                "user" => {
                    let (text, attachments) =
                        user_content(&message.content).map_err(|e| format!("input[{i}]: {e}"))?;
                    Message::user_with(text, attachments)
                }
                "system" | "developer" => {
                    Message::system(text_of(&message.content).unwrap_or_default())
                }
                "assistant" => Message::assistant(text_of(&message.content).unwrap_or_default()),
                other => {
                    return Err(format!(
                        "input[{i}]: unknown role `{other}`; use user, system, developer or assistant"
                    ));
                }
            }),
            Item::FunctionCall(call) => {
                let name = super::client_tools::offered_name(call.namespace.as_deref(), &call.name);
                add_call(
                    &mut messages,
                    ToolCall::new(call.call_id, name, call.arguments),
                )
            }
            Item::CustomToolCall(call) => add_call(
                &mut messages,
                ToolCall::new(
                    call.call_id,
                    call.name,
                    json!({ "input": call.input }).to_string(),
                ),
            ),
            Item::McpCall(call) | Item::SkillCall(call) => {
                let call_id = call
                    .call_id
                    .unwrap_or_else(|| call.id.trim_start_matches("mcp_").to_owned());
                add_call(
                    &mut messages,
                    ToolCall::new(call_id.clone(), call.name, call.arguments),
                );
                let (content, is_error) = match call.error {
                    Some(error) => (error, true),
                    None => (call.output.unwrap_or_default(), false),
                };
                messages.push(Message::tool_result(call_id, content, is_error));
            }
            Item::FunctionCallOutput(output) | Item::CustomToolCallOutput(output) => {
                let text = text_of(&output.output).ok_or_else(|| {
                    format!("input[{i}]: a `function_call_output` item needs `output`")
                })?;
                messages.push(Message::tool_result(output.call_id, text, false));
            }
            Item::Reasoning(_) => {}
            Item::Compaction(item) => messages.push(
                compaction(&item.encrypted_content).map_err(|e| {
                    format!("input[{i}]: this `compaction` item cannot be read: {e}")
                })?,
            ),
            Item::ItemReference(reference) => {
                return Err(format!(
                    "input[{i}]: item `{}` is not known here; send the item itself",
                    reference.id
                ));
            }
        }
    }
    Ok(messages)
}

/// Adds a call to the assistant message it belongs to: the text and calls of one reply
/// travel as consecutive items.
fn add_call(messages: &mut Vec<Message>, call: ToolCall) {
    match messages.last_mut() {
        Some(Message::Assistant { tool_calls, .. }) => tool_calls.push(call),
        _ => messages.push(Message::Assistant {
            content: None,
            tool_calls: vec![call],
        }),
    }
}

/// A function tool the client declares (`{"type": "function", "name", …}`), as the
/// request gives it and the response repeats it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "function")]
pub struct FunctionTool {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub parameters: Option<Value>,
    #[serde(default)]
    pub strict: Option<bool>,
}

impl From<FunctionTool> for ToolSpec {
    fn from(tool: FunctionTool) -> Self {
        ToolSpec {
            name: tool.name,
            description: tool.description.unwrap_or_default(),
            parameters: tool
                .parameters
                .filter(|p| !p.is_null())
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        }
    }
}

/// Where a response stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseStatus {
    InProgress,
    Completed,
    Incomplete,
    Failed,
    /// Stopped by `POST /v1/responses/{id}/cancel` (or the turn's own cancel).
    Cancelled,
}

/// A response object (`"object": "response"`), every field the API has.
#[derive(Clone, Debug, Serialize)]
pub struct ResponseObject {
    pub id: String,
    pub object: &'static str,
    pub created_at: u64,
    pub completed_at: Option<u64>,
    pub status: ResponseStatus,
    pub error: Option<ResponseError>,
    pub incomplete_details: Option<IncompleteDetails>,
    pub instructions: Option<String>,
    pub max_output_tokens: Option<u32>,
    pub max_tool_calls: Option<u64>,
    pub model: String,
    pub output: Vec<Item>,
    pub parallel_tool_calls: bool,
    pub previous_response_id: Option<String>,
    /// The conversation (Conversations API) the response was added to, when it was.
    pub conversation: Option<ConversationRef>,
    pub reasoning: ReasoningSettings,
    pub store: bool,
    pub background: bool,
    pub service_tier: &'static str,
    pub temperature: f64,
    pub top_p: f64,
    pub presence_penalty: f64,
    pub frequency_penalty: f64,
    pub top_logprobs: u32,
    pub text: TextSettings,
    pub tool_choice: Value,
    pub tools: Vec<FunctionTool>,
    pub truncation: &'static str,
    pub usage: Option<ResponseUsage>,
    pub user: Option<String>,
    pub safety_identifier: Option<String>,
    pub prompt_cache_key: Option<String>,
    pub metadata: Value,
    /// buddy's own extension: why the turn ended and what it did.
    pub buddy: BuddyDetails,
}

/// A conversation a response belongs to: `{"id": "conv_…"}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConversationRef {
    pub id: String,
}

/// Why a response failed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResponseError {
    pub code: &'static str,
    pub message: String,
}

/// Why a response is incomplete (`max_output_tokens`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IncompleteDetails {
    pub reason: &'static str,
}

/// The reasoning settings a response repeats (buddy sets none).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReasoningSettings {
    pub effort: Option<String>,
    pub summary: Option<String>,
}

/// The text format a response was made with.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TextSettings {
    pub format: ResponseFormat,
}

/// A response's token counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResponseUsage {
    pub input_tokens: u64,
    pub input_tokens_details: CachedTokens,
    pub output_tokens: u64,
    pub output_tokens_details: ReasoningTokens,
    pub total_tokens: u64,
}

impl ResponseUsage {
    /// The usage of `input` tokens (`cached` of them from the prompt cache) and `output`.
    pub fn new(input: u64, cached: u64, output: u64) -> Self {
        ResponseUsage {
            input_tokens: input,
            input_tokens_details: CachedTokens {
                cached_tokens: cached,
            },
            output_tokens: output,
            output_tokens_details: ReasoningTokens {
                reasoning_tokens: 0,
            },
            total_tokens: input + output,
        }
    }
}

/// `input_tokens_details`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CachedTokens {
    pub cached_tokens: u64,
}

/// `output_tokens_details`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReasoningTokens {
    pub reasoning_tokens: u64,
}

/// One event of a streamed response (its `sequence_number` is added when it is sent).
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type")]
pub enum StreamEvent {
    #[serde(rename = "response.created")]
    Created { response: Box<ResponseObject> },
    #[serde(rename = "response.in_progress")]
    InProgress { response: Box<ResponseObject> },
    #[serde(rename = "response.completed")]
    Completed { response: Box<ResponseObject> },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: Box<ResponseObject> },
    #[serde(rename = "response.failed")]
    Failed { response: Box<ResponseObject> },
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded { output_index: usize, item: Item },
    #[serde(rename = "response.output_item.done")]
    OutputItemDone { output_index: usize, item: Item },
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputText,
    },
    #[serde(rename = "response.content_part.done")]
    ContentPartDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputText,
    },
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta {
        item_id: String,
        output_index: usize,
        content_index: usize,
        delta: String,
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.output_text.done")]
    OutputTextDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        text: String,
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta {
        item_id: Option<String>,
        output_index: usize,
        delta: Arguments,
    },
    #[serde(rename = "response.function_call_arguments.done")]
    FunctionCallArgumentsDone {
        item_id: Option<String>,
        output_index: usize,
        name: String,
        arguments: Arguments,
    },
    /// The turn failed; a `response.failed` follows. The error is both at the event's
    /// top level (OpenAI's `ResponseErrorEvent`) and in `error` (Open Responses).
    #[serde(rename = "error")]
    Error {
        code: &'static str,
        message: String,
        param: Option<String>,
        error: StreamError,
    },
}

/// The error of an `error` event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamError {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub code: &'static str,
    pub message: String,
    pub param: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_read_as_written_and_name_what_they_lack() {
        let call = Item::SkillCall(SkillCallItem {
            id: "mcp_1".into(),
            call_id: Some("c1".into()),
            server_label: None,
            name: "lookup".into(),
            arguments: "{}".into(),
            output: Some("found".into()),
            error: None,
            status: Some(ItemStatus::Completed),
        });
        let written = serde_json::to_value(&call).unwrap();
        assert_eq!(written["type"], "buddy:skill_call");
        assert!(written["error"].is_null() && written.get("server_label").is_none());
        assert_eq!(input_items(json!([written])).unwrap(), vec![call]);

        let missing = input_items(json!([{"type": "function_call", "name": "f", "arguments": ""}]));
        assert_eq!(
            missing.unwrap_err(),
            "input[0]: a `function_call` item needs `call_id`"
        );
        let unknown = input_items(json!([{"type": "web_search_call"}])).unwrap_err();
        assert!(
            unknown.contains("`web_search_call` are not supported"),
            "{unknown}"
        );
        assert!(
            input_items(json!([7]))
                .unwrap_err()
                .contains("must be an object")
        );
        let untyped = input_items(json!([{"role": "user", "content": "hi"}])).unwrap();
        let messages = items_to_messages(untyped, |_| Err("none".into())).unwrap();
        assert_eq!(messages, vec![Message::user("hi")]);
    }

    #[test]
    fn a_response_and_its_events_are_in_the_apis_shapes() {
        let item = Item::Message(MessageItem {
            phase: Some(Phase::FinalAnswer),
            ..MessageItem::assistant(
                "msg_1".into(),
                ItemStatus::Completed,
                vec![OutputText::new("hi")],
            )
        });
        let event = serde_json::to_value(StreamEvent::OutputItemDone {
            output_index: 0,
            item,
        })
        .unwrap();
        assert_eq!(
            event,
            json!({"type": "response.output_item.done", "output_index": 0, "item": {
                "type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                "phase": "final_answer",
                "content": [{"type": "output_text", "text": "hi", "annotations": [], "logprobs": []}]}})
        );
        let tools =
            crate::client_tools::client_tools(vec![json!({"type": "function", "name": "f"})])
                .unwrap()
                .offered;
        assert_eq!(
            serde_json::to_value(&tools[0]).unwrap(),
            json!({"type": "function", "name": "f", "description": null, "parameters": null, "strict": null})
        );
    }
}
