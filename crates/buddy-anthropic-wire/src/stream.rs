//! The server-sent events of a streamed reply, in Anthropic's order: `message_start`,
//! then each block's `content_block_start`, deltas and `content_block_stop`, then
//! `message_delta` (stop reason and usage) and `message_stop`; `ping` anywhere, `error`
//! in place of the rest.

use serde::{Deserialize, Serialize};

use super::response::{ErrorDetail, MessageResponse, OutputBlock};

/// One event of a stream; its `type` is also the SSE event name.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    MessageStart {
        message: MessageResponse,
    },
    ContentBlockStart {
        index: usize,
        content_block: OutputBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDelta,
        usage: DeltaUsage,
    },
    MessageStop,
    Ping,
    Error {
        error: ErrorDetail,
    },
}

impl StreamEvent {
    /// The SSE event name (the `type`).
    pub fn name(&self) -> &'static str {
        match self {
            StreamEvent::MessageStart { .. } => "message_start",
            StreamEvent::ContentBlockStart { .. } => "content_block_start",
            StreamEvent::ContentBlockDelta { .. } => "content_block_delta",
            StreamEvent::ContentBlockStop { .. } => "content_block_stop",
            StreamEvent::MessageDelta { .. } => "message_delta",
            StreamEvent::MessageStop => "message_stop",
            StreamEvent::Ping => "ping",
            StreamEvent::Error { .. } => "error",
        }
    }
}

/// A piece of a block.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockDelta {
    TextDelta { text: String },
    InputJsonDelta { partial_json: String },
    ThinkingDelta { thinking: String },
    SignatureDelta { signature: String },
    CitationsDelta { citation: serde_json::Value },
}

/// `message_delta`'s `delta`: how the message ended.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct MessageDelta {
    pub stop_reason: Option<String>,
    pub stop_sequence: Option<String>,
    #[serde(default)]
    pub stop_details: Option<serde_json::Value>,
    #[serde(default)]
    pub container: Option<serde_json::Value>,
}

/// `message_delta`'s usage: the output so far, and the input figures when known.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct DeltaUsage {
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    pub output_tokens_details: Option<serde_json::Value>,
    #[serde(default)]
    pub server_tool_use: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Anthropic's real streams, recorded (see that folder's SOURCES.md).
    const RECORDINGS: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../buddy-providers/tests/fixtures/streams"
    );

    /// The data lines of a recorded stream, with their event names.
    fn events_of(name: &str) -> Vec<(String, String)> {
        let text = std::fs::read_to_string(format!("{RECORDINGS}/{name}"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut out = Vec::new();
        let mut event = String::new();
        for line in text.lines() {
            if let Some(name) = line.strip_prefix("event: ") {
                event = name.to_owned();
            } else if let Some(data) = line.strip_prefix("data: ") {
                out.push((event.clone(), data.to_owned()));
            }
        }
        out
    }

    #[test]
    fn anthropics_own_recorded_streams_read_as_these_events() {
        let names = [
            "anthropic_text_then_tool_use.sse",
            "anthropic_thinking_then_text.sse",
            "anthropic_tool_use_no_args.sse",
            "anthropic_tool_use_max_tokens_truncated.sse",
            "anthropic_overloaded_error.sse",
        ];
        let mut read = 0;
        for name in names {
            for (event, data) in events_of(name) {
                let parsed: StreamEvent =
                    serde_json::from_str(&data).unwrap_or_else(|e| panic!("{name}: {data}: {e}"));
                assert_eq!(parsed.name(), event, "{name}");
                read += 1;
            }
        }
        assert!(read > 20, "{read} events read");
    }
}
