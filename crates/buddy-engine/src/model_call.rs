//! One model call: stream its tokens out as events and collect the reply.

use std::time::Instant;

use buddy_core::{
    ChatEvent, CompletionRequest, FinishReason, Provider, ProviderError, Token, ToolCall, Usage,
};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::emitter::Emitter;
use crate::guards::chant::ChantDetector;
use crate::history_check::HistoryError;

/// A model's whole reply to one call.
#[derive(Debug, Default)]
pub(crate) struct Reply {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish: Option<FinishReason>,
    pub usage: Option<Usage>,
    /// The text started repeating itself and was cut: `text` keeps one copy of the chunk,
    /// and this holds the text as it had streamed when it was cut.
    pub chanted: Option<String>,
    /// The tape step that records this reply.
    pub tape_step: usize,
}

/// Why a model call did not produce a reply.
#[derive(Debug)]
pub(crate) enum CallEnd {
    /// The turn was cancelled: the text the call had streamed by then (its partial reply).
    Cancelled(String),
    Deadline,
    Invalid(HistoryError),
    /// Even the pinned messages do not fit the window; the message says what to change.
    Overflow(String),
    /// The provider refused the request as too long for its context window, even after
    /// buddy trimmed harder and retried.
    ContextRefused(ProviderError),
    Provider(ProviderError),
    /// The key's ledger had no room for the call's worst case: it was not made.
    NoRoom(String),
}

/// Sends `request` once a slot of `slots` is free and its worst case (`worst`) is reserved in the slots' ledger, streaming text to `events`, until the
/// reply ends, the turn is cancelled, the deadline passes, or the text starts chanting
/// (then the rest of the reply is not read). The reservation is settled to the reply's
/// usage; a call dropped by a cancel or the deadline leaves its reservation to the
/// turn's end, which settles what is left of its hold.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn stream_reply(
    provider: &dyn Provider,
    slots: Option<&crate::CallSlots>,
    events: &Emitter,
    cancel: &CancellationToken,
    deadline: Option<Instant>,
    chant: Option<ChantDetector>,
    mut request: CompletionRequest<'_>,
    worst: crate::CallWorst,
) -> Result<Reply, CallEnd> {
    let deadline_passed = crate::deadline::passed(deadline);
    tokio::pin!(deadline_passed);
    // Read into here, so that a cancel keeps the text streamed so far.
    let mut reply = Reply::default();
    let collect = async {
        // Held until the reply is read: waiting for it counts against the deadline.
        let _slot = match slots {
            Some(slots) => slots.take().await,
            None => None,
        };
        let Some(ledger) = slots.and_then(|s| s.ledger()) else {
            return read_reply(provider, events, chant, request, &mut reply).await;
        };
        let reserved = ledger.reserve(worst).await.map_err(CallEnd::NoRoom)?;
        if let Some(bound) = reserved.max_output_tokens {
            request.max_output_tokens = Some(
                request
                    .max_output_tokens
                    .map_or(bound, |asked| asked.min(bound)),
            );
        }
        let read = read_reply(provider, events, chant, request, &mut reply).await;
        let usage = if read.is_ok() { reply.usage } else { None };
        ledger.settle(reserved, usage).await;
        read
    };
    let ended = tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(CallEnd::Cancelled(String::new())),
        _ = &mut deadline_passed => Err(CallEnd::Deadline),
        read = collect => read,
    };
    match ended {
        Ok(()) => Ok(reply),
        Err(CallEnd::Cancelled(_)) => Err(CallEnd::Cancelled(reply.text)),
        Err(end) => Err(end),
    }
}

/// Streams one reply to its end (or until the text starts chanting).
async fn read_reply(
    provider: &dyn Provider,
    events: &Emitter,
    mut chant: Option<ChantDetector>,
    request: CompletionRequest<'_>,
    reply: &mut Reply,
) -> Result<(), CallEnd> {
    let mut stream = provider.stream(request).await.map_err(CallEnd::Provider)?;
    while let Some(token) = stream.next().await {
        match token.map_err(CallEnd::Provider)? {
            Token::Text { text } | Token::Refusal { text } => {
                reply.text.push_str(&text);
                events.emit(ChatEvent::TextDelta { text }).await;
                if let Some(keep) = chant.as_mut().and_then(|c| c.check(&reply.text)) {
                    reply.chanted = Some(reply.text.clone());
                    reply.text.truncate(keep);
                    break;
                }
            }
            Token::ToolCall(call) => reply.tool_calls.push(call),
            Token::Finish { reason, usage } => {
                reply.finish = Some(reason);
                if usage.is_some() {
                    reply.usage = usage;
                }
            }
            // What the server says its reply is (id, model): for the call's span.
            Token::Response(info) => {
                if let Some(observer) = events.observer() {
                    observer.model_call_response(&info);
                }
            }
            _ => {}
        }
    }
    Ok(())
}
