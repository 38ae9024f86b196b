use std::sync::{Arc, Mutex};

use buddy_core::{
    BoxFuture, CompletionRequest, FinishReason, Message, Provider, ProviderError, Token,
    TokenStream, ToolCall, ToolChoice, Usage,
};

/// What a provider was asked, captured for assertions.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    pub messages: Vec<Message>,
    /// `None` when no tools were sent; else the names offered.
    pub tools: Option<Vec<String>>,
    pub tool_choice: Option<ToolChoice>,
    /// The conversation's prompt-cache key sent with the request.
    pub cache_key: Option<String>,
    /// A client's cache breakpoints sent with it.
    pub cache_marks: Vec<buddy_core::CacheMark>,
}

/// Wraps a provider and records every request it receives.
pub struct RecordingProvider<P> {
    inner: P,
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
}

impl<P> RecordingProvider<P> {
    /// Records requests on their way to `inner`.
    pub fn new(inner: P) -> Self {
        RecordingProvider {
            inner,
            requests: Arc::default(),
        }
    }

    /// A handle to the recorded requests, usable after the provider moved into an engine.
    pub fn requests(&self) -> Arc<Mutex<Vec<RecordedRequest>>> {
        Arc::clone(&self.requests)
    }
}

impl<P: Provider> Provider for RecordingProvider<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn unsupported(&self, sampling: &buddy_core::Sampling) -> Option<String> {
        self.inner.unsupported(sampling)
    }

    fn refuses(&self, attachment: &buddy_core::Attachment) -> Option<String> {
        self.inner.refuses(attachment)
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        if let Ok(mut log) = self.requests.lock() {
            log.push(RecordedRequest {
                messages: request.messages.to_vec(),
                tools: request
                    .tools
                    .map(|t| t.iter().map(|s| s.name.clone()).collect()),
                tool_choice: request.tool_choice,
                cache_key: request.cache_key.map(str::to_owned),
                cache_marks: request.cache_marks.to_vec(),
            });
        }
        self.inner.stream(request)
    }
}

/// The tokens of a reply with `text` and `calls`, finished as a real provider would.
pub fn reply_tokens(text: &str, calls: Vec<ToolCall>) -> Vec<Result<Token, ProviderError>> {
    let mut tokens = Vec::new();
    if !text.is_empty() {
        tokens.push(Ok(Token::Text {
            text: text.to_owned(),
        }));
    }
    let finish = if calls.is_empty() {
        FinishReason::Stop
    } else {
        FinishReason::ToolCalls
    };
    tokens.extend(calls.into_iter().map(|c| Ok(Token::ToolCall(c))));
    tokens.push(Ok(Token::Finish {
        reason: finish,
        usage: Some(Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        }),
    }));
    tokens
}

type ReplyFn = dyn Fn(&CompletionRequest<'_>, usize) -> Result<Vec<Result<Token, ProviderError>>, ProviderError>
    + Send
    + Sync;

/// A provider whose replies come from a function of the request and the call number (0-based).
pub struct ReplyProvider {
    reply: Box<ReplyFn>,
    calls: Mutex<usize>,
}

impl ReplyProvider {
    /// A provider answering with `reply(request, call_index)`.
    pub fn new(
        reply: impl Fn(
            &CompletionRequest<'_>,
            usize,
        ) -> Result<Vec<Result<Token, ProviderError>>, ProviderError>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        ReplyProvider {
            reply: Box::new(reply),
            calls: Mutex::new(0),
        }
    }
}

impl Provider for ReplyProvider {
    fn name(&self) -> &str {
        "reply"
    }

    /// A test model: every setting is accepted (the reply function decides).
    fn unsupported(&self, _: &buddy_core::Sampling) -> Option<String> {
        None
    }

    fn refuses(&self, _: &buddy_core::Attachment) -> Option<String> {
        None
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        let index = match self.calls.lock() {
            Ok(mut n) => {
                *n += 1;
                *n - 1
            }
            Err(_) => 0,
        };
        let tokens = (self.reply)(&request, index);
        Box::pin(async move { Ok(Box::pin(futures::stream::iter(tokens?)) as TokenStream) })
    }
}
