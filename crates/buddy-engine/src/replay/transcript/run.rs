//! One run's record around its messages: where the messages are kept, its id, source,
//! model and tools, whether it succeeded, and OpenAI request logs.

use buddy_core::ToolSpec;
use serde_json::{Map, Value};

use super::messages::to_messages;
use super::{InputError, LoggedRun, MESSAGE_KEYS};

/// The run `value` holds (an array of messages, or an object with them).
pub(super) fn run_of(value: Value, place: String, source: &str) -> Result<LoggedRun, InputError> {
    let fail = |message: String| InputError {
        place: place.clone(),
        message,
    };
    let (object, messages) = match value {
        Value::Array(messages) => (Map::new(), messages),
        Value::Object(mut object) => {
            let messages = match MESSAGE_KEYS.iter().find_map(|k| object.remove(*k)) {
                Some(Value::Array(messages)) => messages,
                Some(_) => return Err(fail("`messages` is not an array".to_owned())),
                None => request_and_response(&mut object).ok_or_else(|| {
                    fail(
                        "no `messages` array: give a conversation as an array of messages or an object with `messages`"
                            .to_owned(),
                    )
                })?,
            };
            (object, messages)
        }
        _ => {
            return Err(fail(
                "a conversation is an array of messages or an object with `messages`".to_owned(),
            ));
        }
    };
    let messages = to_messages(messages).map_err(fail)?;
    let tools = match object.get("tools") {
        Some(Value::Array(tools)) => tools.iter().filter_map(tool_spec).collect(),
        _ => Vec::new(),
    };
    Ok(LoggedRun {
        id: object
            .get("id")
            .and_then(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .unwrap_or_else(|| place.clone()),
        source: object
            .get("source")
            .and_then(Value::as_str)
            .map_or_else(|| source.to_owned(), str::to_owned),
        success: success_of(&object),
        model: object
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned),
        messages,
        tools,
    })
}

/// An OpenAI request log (`{"request": {"messages": …}, "response": {"choices": …}}`): the
/// request's messages and the reply the response carried.
fn request_and_response(object: &mut Map<String, Value>) -> Option<Vec<Value>> {
    let request = object.get("request")?.clone();
    let mut messages = request.get("messages")?.as_array()?.clone();
    if let Some(tools) = request.get("tools") {
        object.entry("tools").or_insert_with(|| tools.clone());
    }
    if let Some(model) = request.get("model") {
        object.entry("model").or_insert_with(|| model.clone());
    }
    if let Some(reply) = object
        .get("response")
        .and_then(|r| r.pointer("/choices/0/message"))
    {
        messages.push(reply.clone());
    }
    Some(messages)
}

/// Whether the run solved its task: `success` (or `solved`, `resolved`, `utility`) as a
/// boolean, 0/1 or a word; else a `reward` of 1.
fn success_of(object: &Map<String, Value>) -> Option<bool> {
    for key in ["success", "solved", "resolved", "utility"] {
        match object.get(key) {
            Some(Value::Bool(b)) => return Some(*b),
            Some(Value::Number(n)) => return n.as_f64().map(|x| x >= 1.0),
            Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" | "solved" | "resolved" | "success" | "pass" | "passed" => {
                    return Some(true);
                }
                "false" | "no" | "0" | "unsolved" | "failure" | "fail" | "failed" => {
                    return Some(false);
                }
                _ => {}
            },
            _ => {}
        }
    }
    object
        .get("reward")
        .and_then(Value::as_f64)
        .map(|r| r >= 1.0 - 1e-9)
}

/// A tool declaration: OpenAI's (`{"type": "function", "function": {…}}`), flat, or
/// Anthropic's (`input_schema`).
fn tool_spec(value: &Value) -> Option<ToolSpec> {
    let function = value.get("function").unwrap_or(value);
    Some(ToolSpec {
        name: function.get("name")?.as_str()?.to_owned(),
        description: function
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        parameters: function
            .get("parameters")
            .or_else(|| function.get("input_schema"))
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
    })
}
