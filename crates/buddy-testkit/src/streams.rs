//! Builders of realistic response bodies in both wire formats.

use serde_json::{Value, json};

/// An OpenAI Chat Completions SSE body: `text` in small deltas, each call's arguments
/// in fragments, then finish, a usage chunk and `[DONE]`.
pub fn openai_sse(text: &str, calls: &[(&str, &str, &str)]) -> String {
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let mut body = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(5) {
        body.push_str(&chunk(
            json!({"content": piece.iter().collect::<String>()}),
            Value::Null,
        ));
    }
    for (i, (id, name, args)) in calls.iter().enumerate() {
        body.push_str(&chunk(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ));
        let arg_chars: Vec<char> = args.chars().collect();
        for piece in arg_chars.chunks(4) {
            body.push_str(&chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": piece.iter().collect::<String>()}}]}),
                Value::Null,
            ));
        }
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    body.push_str(&chunk(json!({}), json!(finish)));
    body.push_str(&format!(
        "data: {}\n\n",
        json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "choices": [],
               "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}})
    ));
    body.push_str("data: [DONE]\n\n");
    body
}

/// An Anthropic Messages SSE body: a text block, then one `tool_use` block per call with
/// its input in `input_json_delta` fragments, then `message_delta` and `message_stop`.
pub fn anthropic_sse(text: &str, calls: &[(&str, &str, &str)]) -> String {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut body = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_test", "type": "message", "role": "assistant",
               "content": [], "model": "m", "stop_reason": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}),
    );
    let mut index = 0;
    if !text.is_empty() {
        body.push_str(&event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ));
        body.push_str(&event("ping", json!({"type": "ping"})));
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(5) {
            body.push_str(&event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": piece.iter().collect::<String>()}}),
            ));
        }
        body.push_str(&event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        index += 1;
    }
    for (id, name, args) in calls {
        body.push_str(&event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        body.push_str(&event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ));
        let arg_chars: Vec<char> = args.chars().collect();
        for piece in arg_chars.chunks(4) {
            body.push_str(&event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "input_json_delta", "partial_json": piece.iter().collect::<String>()}}),
            ));
        }
        body.push_str(&event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    body.push_str(&event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 12}}),
    ));
    body.push_str(&event("message_stop", json!({"type": "message_stop"})));
    body
}
