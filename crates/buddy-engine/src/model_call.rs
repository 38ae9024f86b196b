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
    Cancelled,
    Deadline,
    Invalid(HistoryError),
    /// Even the pinned messages do not fit the window; the message says what to change.
    Overflow(String),
    /// The provider refused the request as too long for its context window, even after
    /// buddy trimmed harder and retried.
    ContextRefused(ProviderError),
    Provider(ProviderError),
}

/// Sends `request` once a slot of `slots` is free, streaming text to `events`, until the reply ends, the turn is
/// cancelled, the deadline passes, or the text starts chanting (then the rest of the
/// reply is not read).
pub(crate) async fn stream_reply(
    provider: &dyn Provider,
    slots: Option<&crate::CallSlots>,
    events: &Emitter,
    cancel: &CancellationToken,
    deadline: Option<Instant>,
    mut chant: Option<ChantDetector>,
    request: CompletionRequest<'_>,
) -> Result<Reply, CallEnd> {
    let deadline_passed = crate::deadline::passed(deadline);
    tokio::pin!(deadline_passed);
    let collect = async {
        // Held until the reply is read: waiting for it counts against the deadline.
        let _slot = match slots {
            Some(slots) => slots.take().await,
            None => None,
        };
        let mut stream = provider.stream(request).await.map_err(CallEnd::Provider)?;
        let mut reply = Reply::default();
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
        Ok(reply)
    };
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(CallEnd::Cancelled),
        _ = &mut deadline_passed => Err(CallEnd::Deadline),
        reply = collect => reply,
    }
}
