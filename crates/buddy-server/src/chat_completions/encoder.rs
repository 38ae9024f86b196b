//! A turn as Chat Completions: the streamed chunks ([`ChatChunks`]) and the whole
//! completion ([`completion`]).

use axum::body::Bytes;
use buddy_core::{ChatEvent, StopReason, TurnStats};
use buddy_openai_wire::BuddyDetails;
use buddy_openai_wire::completion::{
    AssistantMessage, ChatCompletion, ChatUsage, Choice, Chunk, Delta, OutputToolCall,
};

use crate::error::AppError;
use crate::sse;
use crate::turn::{Encoder, PendingCalls, unix_now};

/// The streamed form: text as it comes, client tool calls at the end, usage, `[DONE]`.
pub(crate) struct ChatChunks {
    id: String,
    model: String,
    created: u64,
    include_usage: bool,
    pending: PendingCalls,
    /// A model call went on to call tools since the last text.
    narrated: bool,
    streamed_text: bool,
}

impl ChatChunks {
    /// The chunks of completion `id` of `model`; usage at the end when asked for.
    pub(crate) fn new(id: String, model: String, include_usage: bool) -> Self {
        ChatChunks {
            id,
            model,
            created: unix_now(),
            include_usage,
            pending: PendingCalls::default(),
            narrated: false,
            streamed_text: false,
        }
    }

    fn chunk(&self, delta: Delta, finish_reason: Option<&'static str>) -> Bytes {
        let chunk = Chunk {
            usage: self.include_usage.then_some(None),
            ..Chunk::new(&self.id, self.created, &self.model, delta, finish_reason)
        };
        sse::json_frame(None, &chunk)
    }

    fn done(&mut self, reason: StopReason, stats: &TurnStats) -> Vec<Bytes> {
        let mut out = Vec::new();
        if reason == StopReason::ClientToolCalls {
            let calls = self
                .pending
                .take()
                .into_iter()
                .enumerate()
                .map(|(i, c)| OutputToolCall::whole(Some(i), &c.id, &c.name, c.arguments))
                .collect();
            out.push(self.chunk(Delta::calls(calls), None));
        }
        out.push(self.chunk(Delta::default(), Some(finish_reason(reason))));
        if self.include_usage {
            let usage = ChatUsage::new(stats.input_tokens, stats.output_tokens);
            let last = Chunk::usage(&self.id, self.created, &self.model, usage);
            out.push(sse::json_frame(None, &last));
        }
        out
    }
}

impl Encoder for ChatChunks {
    type Frame = Bytes;

    fn opening(&mut self) -> Vec<Bytes> {
        vec![self.chunk(Delta::opening(), None)]
    }

    fn encode(&mut self, _seq: u64, event: &ChatEvent) -> Vec<Bytes> {
        self.pending.track(event);
        match event {
            ChatEvent::TextDelta { text } => {
                // Narration of an earlier tool round is separated from what follows
                // (only when some text was streamed before it).
                let text = match self.narrated && self.streamed_text {
                    true => format!("\n\n{text}"),
                    false => text.clone(),
                };
                self.narrated = false;
                self.streamed_text = true;
                vec![self.chunk(Delta::text(text), None)]
            }
            ChatEvent::IterationStats {
                tool_calls_requested,
                ..
            } => {
                self.narrated |= *tool_calls_requested > 0;
                Vec::new()
            }
            ChatEvent::Done { reason, stats, .. } => self.done(*reason, stats),
            ChatEvent::Error {
                reason, message, ..
            } => {
                let error = AppError::TurnFailed {
                    reason: *reason,
                    message: message.clone(),
                };
                vec![sse::json_frame(None, &error.body())]
            }
            _ => Vec::new(),
        }
    }

    fn closing(&mut self) -> Vec<Bytes> {
        vec![sse::text_frame(None, "[DONE]")]
    }
}

/// The whole completion of a turn that ended with `answer`; the calls still pending are
/// handed back when the turn stopped for the client's tools.
pub(crate) fn completion<'a>(
    id: &'a str,
    model: &'a str,
    reason: StopReason,
    answer: String,
    stats: &TurnStats,
    mut pending: PendingCalls,
) -> ChatCompletion<'a> {
    let calls = match reason {
        StopReason::ClientToolCalls => pending.take(),
        _ => Vec::new(),
    };
    let tool_calls = calls
        .into_iter()
        .map(|c| OutputToolCall::whole(None, &c.id, &c.name, c.arguments))
        .collect();
    let choice = Choice::new(
        AssistantMessage::new(answer, tool_calls),
        finish_reason(reason),
    );
    let usage = ChatUsage::new(stats.input_tokens, stats.output_tokens);
    ChatCompletion {
        buddy: Some(BuddyDetails::of(Some(reason), stats)),
        ..ChatCompletion::new(id, unix_now(), model, choice, usage)
    }
}

fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::ClientToolCalls => "tool_calls",
        StopReason::Truncated => "length",
        _ => "stop",
    }
}
