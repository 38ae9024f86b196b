//! A message as the row that stores it: JSON text written into exactly the room it
//! needs, so a message with megabytes of tool-call arguments costs its size once, not
//! the double a growing buffer leaves behind.

use buddy_core::Message;

/// The JSON text of `message`, in a buffer of exactly its length.
pub(crate) fn message_json(message: &Message) -> Result<String, serde_json::Error> {
    let out = buddy_core::json_exact(message, 0)?;
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(out).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use buddy_core::ToolCall;

    #[test]
    fn the_text_is_the_usual_json_in_a_buffer_of_its_length() {
        let message = Message::Assistant {
            content: Some("Looking \"it\" up.".into()),
            tool_calls: vec![ToolCall::new("c1", "find", r#"{"q":"é\n"}"#)],
        };
        let json = message_json(&message).unwrap_or_default();
        assert_eq!(json, serde_json::to_string(&message).unwrap_or_default());
        assert_eq!(json.capacity(), json.len());
    }
}
