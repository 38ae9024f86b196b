//! A log's messages as buddy's: roles by their many names, LangChain's wrappers, tool
//! calls in OpenAI's, flat, legacy `function_call` and Anthropic `tool_use` forms, and
//! results as `tool` messages or Anthropic `tool_result` blocks.

use buddy_core::{Message, ToolCall};
use serde_json::{Map, Value};

use super::content::{arguments_text, blocks, str_of, text_of};

/// buddy's role for a log's role or LangChain type, if it knows it.
pub(super) fn role_of(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "system" | "developer" | "systemmessage" => "system",
        "user" | "human" | "humanmessage" => "user",
        "assistant" | "ai" | "model" | "aimessage" | "aimessagechunk" => "assistant",
        "tool" | "function" | "ipython" | "toolmessage" | "functionmessage" => "tool",
        "note" => "note",
        _ => return None,
    })
}

/// The messages of a conversation, or what is wrong with the first bad one.
pub(super) fn to_messages(values: Vec<Value>) -> Result<Vec<Message>, String> {
    let mut out = Vec::with_capacity(values.len());
    // Ids given to calls that came without one (legacy `function_call`): a `function`
    // message answers the latest of them.
    let mut unnamed = 0usize;
    let mut last_unnamed: Option<String> = None;
    for (i, value) in values.into_iter().enumerate() {
        let object =
            unwrap_message(value).ok_or_else(|| format!("messages[{i}] is not an object"))?;
        let role_name = object
            .get("role")
            .or_else(|| object.get("type"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let role = role_of(&role_name).ok_or_else(|| {
            format!(
                "messages[{i}]: unknown role `{role_name}`; use system, developer, user, assistant or tool"
            )
        })?;
        let content = object.get("content");
        match role {
            "system" => out.push(Message::system(text_of(content))),
            "note" => out.push(Message::note(text_of(content))),
            "user" => {
                // Anthropic-style results come inside a user message.
                let results = blocks(content, "tool_result");
                for block in &results {
                    out.push(Message::tool_result(
                        str_of(block, "tool_use_id"),
                        text_of(block.get("content")),
                        block
                            .get("is_error")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    ));
                }
                let text = text_of(content);
                if results.is_empty() || !text.trim().is_empty() {
                    out.push(if Message::is_note_text(&text) {
                        Message::note(text)
                    } else {
                        Message::user(text)
                    });
                }
            }
            "assistant" => {
                let mut calls = tool_calls_of(&object);
                for block in blocks(content, "tool_use") {
                    calls.push(ToolCall::new(
                        str_of(&block, "id"),
                        str_of(&block, "name"),
                        arguments_text(block.get("input")),
                    ));
                }
                if let Some(call) = object.get("function_call").filter(|v| v.is_object()) {
                    unnamed += 1;
                    let id = format!("function_call_{unnamed}");
                    last_unnamed = Some(id.clone());
                    calls.push(ToolCall::new(
                        id,
                        str_of(call, "name"),
                        arguments_text(call.get("arguments")),
                    ));
                }
                let text = text_of(content);
                out.push(Message::Assistant {
                    content: (!text.is_empty()).then_some(text),
                    tool_calls: calls,
                });
            }
            _ => {
                let id = object
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| {
                        (role_name == "function")
                            .then(|| last_unnamed.clone())
                            .flatten()
                    })
                    .unwrap_or_default();
                let is_error = object.get("is_error").and_then(Value::as_bool) == Some(true)
                    || object.get("status").and_then(Value::as_str) == Some("error")
                    || object
                        .get("error")
                        .is_some_and(|e| !e.is_null() && e != false);
                out.push(Message::tool_result(id, text_of(content), is_error));
            }
        }
    }
    Ok(out)
}

/// The message's fields, out of LangChain's wrappers (`{"type", "data"}`, or a
/// serialised constructor with `kwargs`).
fn unwrap_message(value: Value) -> Option<Map<String, Value>> {
    let Value::Object(mut object) = value else {
        return None;
    };
    if let Some(Value::Object(mut kwargs)) = object.remove("kwargs") {
        let class = object
            .get("id")
            .and_then(Value::as_array)
            .and_then(|path| path.last())
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        kwargs.entry("type").or_insert(Value::String(class));
        return Some(kwargs);
    }
    if let (Some(Value::String(kind)), Some(Value::Object(_))) =
        (object.get("type").cloned(), object.get("data"))
        && let Some(Value::Object(mut data)) = object.remove("data")
    {
        data.insert("type".to_owned(), Value::String(kind));
        data.remove("role");
        return Some(data);
    }
    Some(object)
}

/// The tool calls of an assistant message: OpenAI's (`function: {name, arguments}`),
/// flat (`name`, `arguments` / `args` / `input`), or LangChain's (`additional_kwargs`).
fn tool_calls_of(object: &Map<String, Value>) -> Vec<ToolCall> {
    let list = object
        .get("tool_calls")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
        .or_else(|| {
            object
                .get("additional_kwargs")
                .and_then(|k| k.get("tool_calls"))
                .and_then(Value::as_array)
        });
    list.map(|calls| {
        calls
            .iter()
            .map(|call| {
                let function = call.get("function").unwrap_or(call);
                let arguments = function
                    .get("arguments")
                    .or_else(|| function.get("args"))
                    .or_else(|| function.get("input"));
                ToolCall::new(
                    str_of(call, "id"),
                    str_of(function, "name"),
                    arguments_text(arguments),
                )
            })
            .collect()
    })
    .unwrap_or_default()
}
