//! buddy's messages as Responses / Conversations API items (`message`,
//! `function_call`, `function_call_output`), for the routes that list them.

use buddy_core::{Attachment, Message};
use serde_json::{Value, json};

/// The items of `message`, with ids from `id` (an assistant message that calls tools is
/// its text, then one `function_call` per call). buddy's own notes to the model are not
/// items.
pub(crate) fn message_items(message: &Message, id: &str) -> Vec<Value> {
    let text = |role: &str, kind: &str, content: &str| {
        json!({"type": "message", "id": id, "role": role, "status": "completed",
               "content": [{"type": kind, "text": content}]})
    };
    match message {
        Message::User {
            content,
            attachments,
        } => {
            let mut item = text("user", "input_text", content);
            if let Some(parts) = item["content"].as_array_mut() {
                parts.extend(attachments.iter().map(attachment_part));
            }
            vec![item]
        }
        Message::System { content } => vec![text("system", "input_text", content)],
        Message::Note { .. } => Vec::new(),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut items = Vec::new();
            if let Some(content) = content.as_deref().filter(|c| !c.is_empty()) {
                let mut item = text("assistant", "output_text", content);
                item["content"][0]["annotations"] = json!([]);
                item["content"][0]["logprobs"] = json!([]);
                items.push(item);
            }
            for (n, call) in tool_calls.iter().enumerate() {
                items.push(json!({"type": "function_call", "id": format!("{id}_fc{n}"),
                    "call_id": call.id, "name": call.name, "arguments": call.arguments,
                    "status": "completed"}));
            }
            items
        }
        Message::Tool {
            tool_call_id,
            content,
            ..
        } => vec![json!({"type": "function_call_output", "id": id,
                         "call_id": tool_call_id, "output": content, "status": "completed"})],
    }
}

/// An attachment as a Responses content part (`input_image`, `input_file`).
fn attachment_part(attachment: &Attachment) -> Value {
    match attachment {
        Attachment::Image { url, detail } => {
            json!({"type": "input_image", "image_url": url, "detail": detail.as_deref().unwrap_or("auto")})
        }
        Attachment::File { filename, data } => {
            json!({"type": "input_file", "filename": filename, "file_data": data})
        }
    }
}

/// A list page of `items` (all of them: `has_more` is false).
pub(crate) fn list(items: Vec<Value>) -> Value {
    json!({
        "object": "list",
        "first_id": items.first().map(|i| i["id"].clone()),
        "last_id": items.last().map(|i| i["id"].clone()),
        "has_more": false,
        "data": items,
    })
}
