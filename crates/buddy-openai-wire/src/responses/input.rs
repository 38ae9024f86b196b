//! A request's `input` and function tools, and their translation into buddy's messages.

use buddy_core::{Message, ToolCall, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::items::{Item, MessageItem};
use crate::content::{text_of, user_content};

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
                let name = crate::client_tools::offered_name(call.namespace.as_deref(), &call.name);
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
