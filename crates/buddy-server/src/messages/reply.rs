//! A turn as one Anthropic message: its blocks, stop reason and usage; the model list
//! in Anthropic's shape.

use axum::http::{HeaderName, HeaderValue};
use axum::response::Response;
use buddy_anthropic_wire::{MessageResponse, OutputBlock, Usage};
use buddy_core::{StopReason, ToolCall, TurnStats};
use serde_json::Value;

/// The header naming why buddy's turn ended (`completed`, `loop_detected`, …).
pub(crate) const STOP_REASON_HEADER: &str = "buddy-stop-reason";

/// The header listing what buddy could not carry of a request.
pub(crate) const WARNING_HEADER: &str = "buddy-warning";

/// Anthropic's stop reason for a turn that ended with `reason`: the client's tools to
/// run, a reply cut by its token limit, or the end of the turn — whatever ended it
/// (buddy's own stops included: the client gets an ordinary answer it does not retry).
pub(crate) fn stop_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::ClientToolCalls => "tool_use",
        StopReason::Truncated => "max_tokens",
        _ => "end_turn",
    }
}

/// The `input` of a call the client runs: its arguments, or `{}` for arguments that are
/// not a JSON object (Anthropic's `input` is always an object).
pub(crate) fn tool_input(call: &ToolCall) -> Value {
    serde_json::from_str::<Value>(call.arguments.as_str())
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::Object(Default::default()))
}

/// A `tool_use` block for a call the client runs.
pub(crate) fn tool_use(call: &ToolCall) -> OutputBlock {
    OutputBlock::tool_use(call.id.clone(), call.name.clone(), tool_input(call))
}

/// The usage of a turn, as Anthropic reports it.
pub(crate) fn usage(stats: &TurnStats) -> Usage {
    Usage {
        input_tokens: stats.input_tokens,
        output_tokens: stats.output_tokens,
        cache_creation_input_tokens: Some(0),
        cache_read_input_tokens: Some(0),
        ..Usage::default()
    }
}

/// The whole message of a turn that ended with `answer` (and the client's `calls`).
pub(crate) fn message(
    id: String,
    model: String,
    reason: StopReason,
    answer: String,
    calls: &[ToolCall],
    stats: &TurnStats,
) -> MessageResponse {
    let mut content = Vec::with_capacity(calls.len() + 1);
    if !answer.is_empty() {
        content.push(OutputBlock::text(answer));
    }
    content.extend(calls.iter().map(tool_use));
    MessageResponse {
        stop_reason: Some(stop_reason(reason).into()),
        ..MessageResponse::new(id, model, content, usage(stats))
    }
}
/// `response` with header `name` set to `value` (left off when it is not a valid value).
pub(crate) fn with_header(mut response: Response, name: &'static str, value: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(value) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(name), value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stopped_turn_is_an_ordinary_end_of_turn_and_calls_are_tool_use_blocks() {
        for reason in [
            StopReason::LoopDetected,
            StopReason::CostBudget,
            StopReason::MaxModelCalls,
        ] {
            assert_eq!(stop_reason(reason), "end_turn");
        }
        let calls = [
            ToolCall::new("t1", "Bash", r#"{"command":"ls"}"#),
            ToolCall::new("t2", "Read", "not json"),
        ];
        let stats = TurnStats {
            input_tokens: 5,
            output_tokens: 2,
            ..TurnStats::default()
        };
        let message = message(
            "msg_1".into(),
            "m".into(),
            StopReason::ClientToolCalls,
            String::new(),
            &calls,
            &stats,
        );
        assert_eq!(
            serde_json::to_value(&message).unwrap()["content"],
            json!([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"},
                    "caller": {"type": "direct"}},
                   {"type": "tool_use", "id": "t2", "name": "Read", "input": {}, "caller": {"type": "direct"}}])
        );
        assert_eq!(message.stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(message.usage.input_tokens, 5);
    }
}
