//! A turn as Anthropic's stream: `message_start` and a `ping`, the answer's text block as
//! it comes, the client's `tool_use` blocks at the end, `message_delta` (stop reason and
//! usage) and `message_stop`; a failed turn's `error` event in their place.

use axum::body::Bytes;
use buddy_anthropic_wire::{
    BlockDelta, DeltaUsage, ErrorDetail, MessageDelta, MessageResponse, OutputBlock, StreamEvent,
    Usage,
};
use buddy_core::{ChatEvent, StopReason, TurnStats};
use serde_json::Value;

use super::errors::anthropic_error;
use super::reply::{stop_reason, tool_input, usage};
use super::thinking::Thinking;
use crate::error::AppError;
use crate::sse;
use crate::turn::{Encoder, PendingCalls};

/// The streamed form of one turn.
pub(crate) struct MessageEvents {
    id: String,
    model: String,
    pending: PendingCalls,
    /// The index of the next block.
    next: usize,
    /// The text block open now (its index).
    open_text: Option<usize>,
    /// A model call went on to call tools since the last text.
    narrated: bool,
    streamed_text: bool,
    /// The upstream's thinking blocks, streamed before anything else of the reply.
    thinking: Option<std::sync::Arc<Thinking>>,
}

impl MessageEvents {
    /// The stream of message `id` of `model`.
    pub(crate) fn new(id: String, model: String) -> Self {
        MessageEvents {
            id,
            model,
            pending: PendingCalls::default(),
            next: 0,
            open_text: None,
            narrated: false,
            streamed_text: false,
            thinking: None,
        }
    }

    /// The same stream, with the thinking blocks `thinking` collects before its text.
    pub(crate) fn with_thinking(mut self, thinking: std::sync::Arc<Thinking>) -> Self {
        self.thinking = Some(thinking);
        self
    }

    /// The thinking blocks collected so far, each whole: its start, its thinking and its
    /// signature as deltas, its stop (a redacted block whole in its start).
    fn thinking(&mut self, out: &mut Vec<Bytes>) {
        let blocks = self.thinking.as_ref().map(|t| t.take()).unwrap_or_default();
        for block in blocks {
            let index = self.next;
            self.next += 1;
            let deltas = match &block {
                OutputBlock::Thinking {
                    thinking,
                    signature,
                } => vec![
                    BlockDelta::ThinkingDelta {
                        thinking: thinking.clone(),
                    },
                    BlockDelta::SignatureDelta {
                        signature: signature.clone(),
                    },
                ],
                _ => Vec::new(),
            };
            let start = match block {
                OutputBlock::Thinking { .. } => OutputBlock::Thinking {
                    thinking: String::new(),
                    signature: String::new(),
                },
                other => other,
            };
            out.push(Self::frame(&StreamEvent::ContentBlockStart {
                index,
                content_block: start,
            }));
            for delta in deltas {
                out.push(Self::frame(&StreamEvent::ContentBlockDelta {
                    index,
                    delta,
                }));
            }
            out.push(Self::frame(&StreamEvent::ContentBlockStop { index }));
        }
    }

    fn frame(event: &StreamEvent) -> Bytes {
        sse::json_frame(Some(event.name()), event)
    }

    /// The text `text`, in the open text block (opened first when none is).
    fn text(&mut self, text: String, out: &mut Vec<Bytes>) {
        let index = match self.open_text {
            Some(index) => index,
            None => {
                let index = self.next;
                self.next += 1;
                self.open_text = Some(index);
                out.push(Self::frame(&StreamEvent::ContentBlockStart {
                    index,
                    content_block: OutputBlock::text(""),
                }));
                index
            }
        };
        out.push(Self::frame(&StreamEvent::ContentBlockDelta {
            index,
            delta: BlockDelta::TextDelta { text },
        }));
    }

    fn close_text(&mut self, out: &mut Vec<Bytes>) {
        if let Some(index) = self.open_text.take() {
            out.push(Self::frame(&StreamEvent::ContentBlockStop { index }));
        }
    }

    fn done(&mut self, reason: StopReason, answer: &str, stats: &TurnStats) -> Vec<Bytes> {
        let mut out = Vec::new();
        self.thinking(&mut out);
        // An answer buddy wrote itself (nothing streamed) still reaches the client.
        if !self.streamed_text && !answer.is_empty() {
            self.text(answer.to_owned(), &mut out);
        }
        self.close_text(&mut out);
        if reason == StopReason::ClientToolCalls {
            for call in self.pending.take() {
                let index = self.next;
                self.next += 1;
                let input = tool_input(&call).to_string();
                let empty = Value::Object(Default::default());
                let start = OutputBlock::tool_use(call.id, call.name, empty);
                out.push(Self::frame(&StreamEvent::ContentBlockStart {
                    index,
                    content_block: start,
                }));
                out.push(Self::frame(&StreamEvent::ContentBlockDelta {
                    index,
                    delta: BlockDelta::InputJsonDelta {
                        partial_json: input,
                    },
                }));
                out.push(Self::frame(&StreamEvent::ContentBlockStop { index }));
            }
        }
        let usage = usage(stats);
        out.push(Self::frame(&StreamEvent::MessageDelta {
            delta: MessageDelta {
                stop_reason: Some(stop_reason(reason).into()),
                stop_sequence: None,
                stop_details: None,
                container: None,
            },
            usage: DeltaUsage {
                output_tokens: usage.output_tokens,
                input_tokens: Some(usage.input_tokens),
                cache_creation_input_tokens: usage.cache_creation_input_tokens,
                cache_read_input_tokens: usage.cache_read_input_tokens,
                output_tokens_details: None,
                server_tool_use: None,
            },
        }));
        out.push(Self::frame(&StreamEvent::MessageStop));
        out
    }
}

/// The whole stream of a reply buddy gives without a turn (`answer`, ended for `reason`).
pub(crate) fn without_turn(
    id: String,
    model: String,
    reason: StopReason,
    answer: String,
) -> Vec<Bytes> {
    let mut events = MessageEvents::new(id, model);
    let mut out = events.opening();
    out.extend(events.done(reason, &answer, &TurnStats::default()));
    out
}

impl Encoder for MessageEvents {
    type Frame = Bytes;

    fn opening(&mut self) -> Vec<Bytes> {
        let start = MessageResponse::new(
            self.id.clone(),
            self.model.clone(),
            Vec::new(),
            Usage {
                output_tokens: 1,
                ..usage(&TurnStats::default())
            },
        );
        vec![
            Self::frame(&StreamEvent::MessageStart { message: start }),
            Self::frame(&StreamEvent::Ping),
        ]
    }

    fn encode(&mut self, _seq: u64, event: &ChatEvent) -> Vec<Bytes> {
        self.pending.track(event);
        let mut out = Vec::new();
        match event {
            ChatEvent::TextDelta { text } => {
                self.thinking(&mut out);
                // Narration of an earlier tool round is set apart from what follows.
                let text = match self.narrated && self.streamed_text {
                    true => format!("\n\n{text}"),
                    false => text.clone(),
                };
                self.narrated = false;
                self.streamed_text = true;
                self.text(text, &mut out);
            }
            ChatEvent::IterationStats {
                tool_calls_requested,
                ..
            } => self.narrated |= *tool_calls_requested > 0,
            ChatEvent::Done {
                reason,
                answer,
                stats,
            } => out = self.done(*reason, answer, stats),
            ChatEvent::Error {
                reason, message, ..
            } => {
                let error = AppError::TurnFailed {
                    reason: *reason,
                    message: message.clone(),
                };
                let (_, body) = anthropic_error(&error.info());
                out.push(Self::frame(&StreamEvent::Error {
                    error: ErrorDetail {
                        kind: body.error.kind,
                        message: body.error.message,
                    },
                }));
            }
            _ => {}
        }
        out
    }
}
