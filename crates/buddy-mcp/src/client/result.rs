//! A `tools/call` result as text the model can read.

use serde_json::Value;

use crate::requests::content::block_text;

/// The text of a `CallToolResult` (as JSON on the wire): text blocks as they are,
/// embedded text resources with their URI, resource links and binary blocks named with
/// a note saying what was dropped, and `structuredContent` as JSON when no text block
/// carries it.
pub fn result_text(result: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for block in blocks {
        parts.push(block_text(block));
    }
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        let json = structured.to_string();
        if !parts.iter().any(|p| {
            p.contains(&json) || serde_json::from_str::<Value>(p).ok().as_ref() == Some(structured)
        }) {
            parts.push(json);
        }
    }
    parts.join("\n")
}

/// A note for the model when a successful result does not keep the tool's output
/// schema (MCP: clients SHOULD validate `structuredContent`): none when it does.
pub(crate) fn structured_mismatch(
    result: &Value,
    schema: &jsonschema::Validator,
) -> Option<String> {
    let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) else {
        return Some(
            "[the tool declares an output schema but sent no structuredContent]".to_owned(),
        );
    };
    let errors: Vec<String> = schema
        .iter_errors(structured)
        .take(3)
        .map(|e| {
            let at = e.instance_path().to_string();
            format!("{}: {e}", if at.is_empty() { "(result)" } else { &at })
        })
        .collect();
    (!errors.is_empty()).then(|| {
        format!(
            "[the result's structuredContent does not match the tool's output schema: {}]",
            errors.join("; ")
        )
    })
}

/// A `tools/call` result as the model reads it: its text, an error when `isError`, and
/// a note when its `structuredContent` does not fit the tool's `output` schema.
pub(crate) fn tool_result(
    result: &rmcp::model::CallToolResult,
    output: Option<&jsonschema::Validator>,
) -> Result<String, buddy_core::SkillError> {
    let result = serde_json::to_value(result).unwrap_or(Value::Null);
    let text = result_text(&result);
    if result.get("isError") == Some(&Value::Bool(true)) {
        return Err(buddy_core::SkillError::Failed(text));
    }
    match output.and_then(|schema| structured_mismatch(&result, schema)) {
        Some(note) => Ok(format!("{text}\n{note}")),
        None => Ok(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_of_block_becomes_readable_text() {
        let text = result_text(&json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c", "description": "the c"},
        ]}));
        assert_eq!(
            text,
            "hello\n[image (image/png, 4 bytes of base64) dropped: buddy passes text only]\n[resource file:///a.txt]\ninside\n[resource file:///b.bin: binary content dropped: buddy passes text only]\n[resource link: file:///c (c): the c]"
        );
    }

    #[test]
    fn structured_content_is_checked_against_the_output_schema() {
        let schema = jsonschema::validator_for(&json!({"type": "object", "required": ["t"],
            "properties": {"t": {"type": "number"}}}))
        .unwrap();
        let good = json!({"content": [], "structuredContent": {"t": 21.5}});
        assert_eq!(structured_mismatch(&good, &schema), None);
        let bad = json!({"content": [], "structuredContent": {"t": "warm"}});
        assert_eq!(
            structured_mismatch(&bad, &schema).as_deref(),
            Some(
                "[the result's structuredContent does not match the tool's output schema: /t: \"warm\" is not of type \"number\"]"
            )
        );
        let none = json!({"content": [{"type": "text", "text": "21.5"}]});
        assert_eq!(
            structured_mismatch(&none, &schema).as_deref(),
            Some("[the tool declares an output schema but sent no structuredContent]")
        );
    }

    #[test]
    fn structured_content_is_added_once() {
        let same = json!({"content": [{"type": "text", "text": "{\"a\":1}"}], "structuredContent": {"a": 1}});
        assert_eq!(result_text(&same), "{\"a\":1}");
        let only = json!({"content": [], "structuredContent": {"a": 1}});
        assert_eq!(result_text(&only), "{\"a\":1}");
    }
}
