//! An MCP content block as text: what a tool result, a prompt message and a sampling
//! request's messages are made of.

use serde_json::Value;

/// One content block (of a tool result or a prompt message) as text: text as it is,
/// embedded text resources with their URI, resource links named, and binary content
/// replaced by a note saying what was dropped.
pub(crate) fn block_text(block: &Value) -> String {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => text("text").to_owned(),
        "image" | "audio" => format!(
            "[{kind} ({}, {} bytes of base64) dropped: buddy passes text only]",
            if text("mimeType").is_empty() {
                "unknown type"
            } else {
                text("mimeType")
            },
            text("data").len()
        ),
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
            match resource.get("text").and_then(Value::as_str) {
                Some(body) => format!("[resource {uri}]\n{body}"),
                None => {
                    format!("[resource {uri}: binary content dropped: buddy passes text only]")
                }
            }
        }
        "resource_link" => {
            let name = text("name");
            let description = text("description");
            let mut line = format!("[resource link: {}", text("uri"));
            if !name.is_empty() {
                line.push_str(&format!(" ({name})"));
            }
            if !description.is_empty() {
                line.push_str(&format!(": {description}"));
            }
            line.push(']');
            line
        }
        other => format!("[a `{other}` content block was dropped]"),
    }
}
