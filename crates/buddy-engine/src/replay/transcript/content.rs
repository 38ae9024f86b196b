//! Fields and content parts as text: a message's content (a string or a list of
//! parts), content blocks of one kind, a call's arguments.

use serde_json::Value;

/// A call's arguments as the JSON text a model sends: a string as it is, anything else
/// written out (`{}` when missing).
pub(super) fn arguments_text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// A string field, or empty.
pub(super) fn str_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Content blocks of one `kind` in a list of parts.
pub(super) fn blocks(content: Option<&Value>, kind: &str) -> Vec<Value> {
    match content {
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some(kind))
            .cloned()
            .collect(),
        _ => Vec::new(),
    }
}

/// The text of a content field: a string, or the text parts of a list joined by newlines.
pub(super) fn text_of(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => match o.get("type").and_then(Value::as_str) {
                    Some("tool_use" | "tool_result" | "image" | "image_url") => None,
                    _ => o
                        .get("text")
                        .or_else(|| o.get("content"))
                        .map(|t| text_of(Some(t))),
                },
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
    }
}
