//! Message content as both OpenAI APIs send it: text, content parts, response formats —
//! read from a client, and written the same way to a provider.

use buddy_core::{Attachment, ResponseFormat};
use serde_json::{Value, json};

/// Text of a message's `content`: a string, or the text parts of an array.
pub fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// A user message's text and attachments, from a string or content parts of either
/// OpenAI API: `text` / `input_text`, `image_url` / `input_image`, `file` / `input_file`
/// (as `file_data`). A part buddy cannot pass on (audio, a `file_id` of a Files API
/// buddy does not have) is refused by name, never dropped.
pub fn user_content(content: &Value) -> Result<(String, Vec<Attachment>), String> {
    let parts = match content {
        Value::String(text) => return Ok((text.clone(), Vec::new())),
        Value::Null => return Ok((String::new(), Vec::new())),
        Value::Array(parts) => parts,
        other => {
            return Err(format!(
                "`content` must be text or a list of parts, got {other}"
            ));
        }
    };
    let mut texts = Vec::new();
    let mut attachments = Vec::new();
    for (n, part) in parts.iter().enumerate() {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("text");
        let string = |v: &Value| v.as_str().map(str::to_owned);
        match kind {
            "text" | "input_text" => {
                texts.push(part.get("text").and_then(string).unwrap_or_default())
            }
            "image_url" | "input_image" => {
                if part.get("file_id").is_some_and(|f| !f.is_null()) {
                    return Err(format!(
                        "part {n}: images by `file_id` need a Files API buddy does not have; send `image_url` (an https: or data: URL)"
                    ));
                }
                // Chat Completions nests it ({"image_url": {"url", "detail"}}); Responses does not.
                let nested = part.get("image_url").filter(|v| v.is_object());
                let url = nested
                    .and_then(|v| v.get("url"))
                    .or_else(|| part.get("image_url"))
                    .and_then(string)
                    .ok_or_else(|| format!("part {n}: an image needs its URL (`image_url`)"))?;
                let detail = nested
                    .and_then(|v| v.get("detail"))
                    .or_else(|| part.get("detail"))
                    .and_then(string);
                let image = Attachment::Image { url, detail }
                    .checked()
                    .map_err(|e| format!("part {n}: image_url: {e}"))?;
                attachments.push(image);
            }
            "file" | "input_file" => {
                let file = part.get("file").filter(|v| v.is_object()).unwrap_or(part);
                if file.get("file_id").is_some_and(|f| !f.is_null()) {
                    return Err(format!(
                        "part {n}: files by `file_id` need a Files API buddy does not have; send `file_data` (a data: URL)"
                    ));
                }
                let data = file.get("file_data").and_then(string).ok_or_else(|| {
                    format!("part {n}: a file needs `file_data` (data:<media type>;base64,…); file URLs are not fetched")
                })?;
                let filename = file.get("filename").and_then(string);
                let file = Attachment::File { filename, data };
                file.check()
                    .map_err(|e| format!("part {n}: file_data: {e}"))?;
                attachments.push(file);
            }
            other => {
                return Err(format!(
                    "part {n}: content of type `{other}` is not supported; buddy takes text, images and files"
                ));
            }
        }
    }
    Ok((texts.join("\n"), attachments))
}

/// A response format in the flat form (`{"type": "json_schema", "name", "schema", …}`,
/// the Responses API's `text.format`), or what is wrong with it.
pub fn response_format(format: Value) -> Result<ResponseFormat, String> {
    serde_json::from_value(format).map_err(|e| {
        format!("{e}; use {{\"type\": \"text\"}}, {{\"type\": \"json_object\"}} or a json_schema with `name` and `schema`")
    })
}

/// A user message's content: its text, or (with images or files) content parts.
pub fn user_content_value(text: &str, attachments: &[Attachment]) -> Value {
    if attachments.is_empty() {
        return json!(text);
    }
    let mut parts = Vec::with_capacity(attachments.len() + 1);
    if !text.is_empty() {
        parts.push(json!({"type": "text", "text": text}));
    }
    for attachment in attachments {
        parts.push(match attachment {
            Attachment::Image { url, detail } => {
                let mut image = json!({"url": url});
                if let Some(detail) = detail {
                    image["detail"] = json!(detail);
                }
                json!({"type": "image_url", "image_url": image})
            }
            Attachment::File { filename, data } => {
                let mut file = json!({"file_data": data});
                if let Some(filename) = filename {
                    file["filename"] = json!(filename);
                }
                json!({"type": "file", "file": file})
            }
        });
    }
    Value::Array(parts)
}

/// OpenAI's `response_format` for a requested shape.
pub fn response_format_value(format: &ResponseFormat) -> Value {
    match format {
        ResponseFormat::Text => json!({"type": "text"}),
        ResponseFormat::JsonObject => json!({"type": "json_object"}),
        ResponseFormat::JsonSchema {
            name,
            schema,
            description,
            strict,
        } => {
            let mut spec = json!({"name": name, "schema": schema});
            if let Some(description) = description {
                spec["description"] = json!(description);
            }
            if let Some(strict) = strict {
                spec["strict"] = json!(strict);
            }
            json!({"type": "json_schema", "json_schema": spec})
        }
    }
}
