//! Guard mode's pass-through: the turn's first model call, when it is exactly the
//! client's request (the same history, the client's tools and no more), is sent to an
//! upstream that speaks Anthropic's Messages API as the client's own bytes — its cache
//! marks, thinking signatures, beta fields and fields buddy does not know kept. Every
//! other call of the turn (buddy's final-answer call after a guard tripped, a call after
//! a note was added) is buddy's own request, translated as always.

use std::sync::{Arc, Mutex};

use buddy_core::{
    Attachment, BoxFuture, CallPurpose, CompletionRequest, Message, Provider, ProviderError,
    Sampling, ServedBy, TokenStream, ToolChoice, Wire,
};
use futures::StreamExt;

use super::thinking::Thinking;

/// The resolved provider, with the client's request to send once, as it came.
pub(crate) struct Passthrough {
    inner: Arc<dyn Provider>,
    /// The client's body, until it is sent.
    body: Mutex<Option<Vec<u8>>>,
    stream: bool,
    /// The client's history, as buddy read it.
    history: Vec<Message>,
    /// The client's tools, by name, as offered.
    tools: Vec<String>,
    /// The client's headers that go with its body (`anthropic-beta`).
    headers: Vec<(String, String)>,
    /// Where the upstream's thinking blocks in its answer to the client's body go.
    thinking: Arc<Thinking>,
}

impl Passthrough {
    /// `inner`, sending `body` (whose history and tools buddy read as `history` and
    /// `tools`) with the client's `headers` as it is for the first call that is exactly
    /// that request.
    pub(crate) fn new(
        inner: Arc<dyn Provider>,
        body: Vec<u8>,
        stream: bool,
        history: Vec<Message>,
        tools: Vec<String>,
        headers: Vec<(String, String)>,
        thinking: Arc<Thinking>,
    ) -> Self {
        Passthrough {
            inner,
            body: Mutex::new(Some(body)),
            stream,
            history,
            tools,
            headers,
            thinking,
        }
    }

    /// Whether `request` asks exactly what the client's body asks.
    fn is_the_clients(&self, request: &CompletionRequest<'_>) -> bool {
        let offered: Vec<&str> = request
            .tools
            .unwrap_or_default()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        request.purpose == CallPurpose::Turn
            && matches!(request.tool_choice, None | Some(ToolChoice::Auto))
            && request.messages == self.history.as_slice()
            && offered == self.tools
    }
}

impl Provider for Passthrough {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn unsupported(&self, sampling: &Sampling) -> Option<String> {
        self.inner.unsupported(sampling)
    }

    fn refuses(&self, attachment: &Attachment) -> Option<String> {
        self.inner.refuses(attachment)
    }

    fn served_by(&self) -> Option<ServedBy<'_>> {
        self.inner.served_by()
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        if self.is_the_clients(&request) {
            let body = self.body.lock().ok().and_then(|mut b| b.take());
            if let Some(body) = body {
                let wire = Wire::AnthropicMessages;
                let (stream, headers) = (self.stream, self.headers.clone());
                let sent = self
                    .inner
                    .forward_exact(wire, body, stream, headers, request.clone());
                if let Some(sent) = sent {
                    let thinking = Arc::clone(&self.thinking);
                    return Box::pin(async move {
                        let tokens = sent.await?;
                        let seen = tokens.inspect(move |token| {
                            if let Ok(token) = token {
                                thinking.on(token);
                            }
                        });
                        Ok(seen.boxed())
                    });
                }
            }
        }
        self.inner.stream(request)
    }
}
