use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::{
    Attachment, BoxFuture, CacheMark, FinishReason, Message, ResponseInfo, Sampling, Token,
    TokenStream, ToolCall, ToolSpec, Usage,
};

/// How the model may use the offered tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// The model must not call tools (sent where the provider supports it).
    None,
    /// The model must call a tool.
    Required,
}

/// Why the engine makes a model call. Providers ignore it; it names the call for
/// recordings, logs and traces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallPurpose {
    /// A round of the turn: the model answers or calls tools.
    #[default]
    Turn,
    /// The last call, without tools, that asks for the final answer.
    Finalize,
    /// The model's reply had no answer; it is asked again with a short note.
    Reask,
}

/// A model API's wire format, as a client's request may come in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wire {
    /// Anthropic's Messages API (`POST /v1/messages`).
    AnthropicMessages,
}

/// One model call. Borrows the history so the engine never copies it per iteration.
///
/// `tools: None` is a plain chat request and must behave exactly like one.
/// `tools: Some(..)` with `tool_choice: Some(ToolChoice::None)` means "defined but not
/// callable" (buddy's Finalize call): render it natively — send `tool_choice: none`
/// where the API has it, or leave the tools out.
#[derive(Clone, Debug)]
pub struct CompletionRequest<'a> {
    pub model: &'a str,
    pub messages: &'a [Message],
    pub tools: Option<&'a [ToolSpec]>,
    pub tool_choice: Option<ToolChoice>,
    pub max_output_tokens: Option<u32>,
    /// Why the call is made.
    pub purpose: CallPurpose,
    /// The W3C `traceparent` of the call's span, sent as a header when tracing is on.
    pub traceparent: Option<&'a str>,
    /// The W3C `tracestate` sent beside `traceparent` (the caller's, passed on).
    pub tracestate: Option<&'a str>,
    /// Sampling and output settings the client asked for (`None`: the provider's own).
    pub sampling: Option<&'a Sampling>,
    /// One key for every call of a conversation, for providers that route requests to
    /// their prompt cache by it (OpenAI's `prompt_cache_key`).
    pub cache_key: Option<&'a str>,
    /// Cache breakpoints a client placed on `messages` itself: kept as placed and
    /// counted against the provider's limit.
    pub cache_marks: &'a [CacheMark],
}

impl<'a> CompletionRequest<'a> {
    /// A plain chat request (no tools) for `model` over `messages`.
    pub fn new(model: &'a str, messages: &'a [Message]) -> Self {
        CompletionRequest {
            model,
            messages,
            tools: None,
            tool_choice: None,
            max_output_tokens: None,
            purpose: CallPurpose::Turn,
            traceparent: None,
            tracestate: None,
            sampling: None,
            cache_key: None,
            cache_marks: &[],
        }
    }

    /// The same request offering `tools`.
    pub fn with_tools(mut self, tools: &'a [ToolSpec]) -> Self {
        self.tools = Some(tools);
        self
    }

    /// True when at least one tool may be called.
    pub fn offers_tools(&self) -> bool {
        self.tool_choice != Some(ToolChoice::None) && self.tools.is_some_and(|t| !t.is_empty())
    }

    /// The tools the model may call: none under `tool_choice: none`.
    pub fn callable_tools(&self) -> &'a [ToolSpec] {
        match (self.tool_choice, self.tools) {
            (Some(ToolChoice::None), _) | (_, None) => &[],
            (_, Some(tools)) => tools,
        }
    }
}

/// A whole model reply, collected from its token stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    pub text: String,
    pub refusal: String,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish: Option<FinishReason>,
    pub usage: Option<Usage>,
    /// The server's id of the reply and the model that wrote it, when it said.
    pub response: Option<ResponseInfo>,
}

/// Who serves a provider's calls, as traces name it (the OpenTelemetry GenAI conventions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServedBy<'a> {
    /// `gen_ai.provider.name`: `openai`, `anthropic`, `azure.ai.openai`, `groq`, …
    pub provider_name: &'a str,
    /// The base URL calls go to (its host and port are `server.address` / `server.port`).
    pub base_url: &'a str,
}

/// A model behind a streaming API. The engine drives only this trait.
pub trait Provider: Send + Sync {
    /// A short name for logs and errors (`openai`, `anthropic`, `scripted`).
    fn name(&self) -> &str;

    /// The first of `sampling`'s settings this provider cannot honour, in words (`None`:
    /// it honours them all). The default honours none: a provider must say what it sends.
    fn unsupported(&self, sampling: &Sampling) -> Option<String> {
        sampling
            .set_fields()
            .first()
            .map(|field| format!("provider `{}` does not take `{field}`", self.name()))
    }

    /// Why this provider cannot take `attachment` (an image or a file), in words; `None`
    /// when it can. The default takes none: a provider must say what it sends.
    fn refuses(&self, attachment: &Attachment) -> Option<String> {
        let kind = match attachment {
            Attachment::Image { .. } => "images",
            Attachment::File { .. } => "files",
        };
        Some(format!(
            "provider `{}` does not take {kind}; send text, or use a provider that reads {kind}",
            self.name()
        ))
    }

    /// The first attachment in `messages` this provider cannot take, in words: one it
    /// does not read, or an image URL whose host is local as URL parsers read it (a row
    /// stored before buddy read hosts so is refused here, before any model call).
    fn refuses_any(&self, messages: &[Message]) -> Option<String> {
        messages
            .iter()
            .flat_map(Message::attachments)
            .find_map(|a| a.url_refusal().or_else(|| self.refuses(a)))
    }

    /// Who serves this provider's calls, for traces; `None` for a model without a server
    /// (the scripted one, test doubles).
    fn served_by(&self) -> Option<ServedBy<'_>> {
        None
    }

    /// Starts a model call and returns its token stream.
    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>>;

    /// Starts the model call `request` describes by sending `body` — a client's own
    /// request in wire format `wire` — to this provider's server exactly as it came
    /// (guard mode's pass-through: the client's cache marks, thinking signatures and
    /// fields buddy does not know are kept byte for byte); `stream` says whether `body`
    /// asks for a stream, and `headers` are the client's own that go with it (its
    /// `anthropic-beta`). `None` when the provider does not speak `wire` (the default).
    fn forward_exact<'a>(
        &'a self,
        _wire: Wire,
        _body: Vec<u8>,
        _stream: bool,
        _headers: Vec<(String, String)>,
        _request: CompletionRequest<'a>,
    ) -> Option<BoxFuture<'a, Result<TokenStream, ProviderError>>> {
        None
    }

    /// Runs a model call to the end and collects its reply.
    fn complete<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async move {
            let mut stream = self.stream(request).await?;
            let mut out = Completion::default();
            while let Some(token) = stream.next().await {
                match token? {
                    Token::Text { text } => out.text.push_str(&text),
                    Token::Refusal { text } => out.refusal.push_str(&text),
                    Token::Reasoning { text } => out.reasoning.push_str(&text),
                    Token::ReasoningSignature { .. } | Token::RedactedReasoning { .. } => {}
                    Token::ToolCall(call) => out.tool_calls.push(call),
                    Token::Finish { reason, usage } => {
                        out.finish = Some(reason);
                        out.usage = usage;
                    }
                    Token::Response(info) => out.response = Some(info),
                }
            }
            Ok(out)
        })
    }
}

impl<P: Provider + ?Sized> Provider for Arc<P> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn unsupported(&self, sampling: &Sampling) -> Option<String> {
        (**self).unsupported(sampling)
    }

    fn refuses(&self, attachment: &Attachment) -> Option<String> {
        (**self).refuses(attachment)
    }

    fn served_by(&self) -> Option<ServedBy<'_>> {
        (**self).served_by()
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        (**self).stream(request)
    }

    fn forward_exact<'a>(
        &'a self,
        wire: Wire,
        body: Vec<u8>,
        stream: bool,
        headers: Vec<(String, String)>,
        request: CompletionRequest<'a>,
    ) -> Option<BoxFuture<'a, Result<TokenStream, ProviderError>>> {
        (**self).forward_exact(wire, body, stream, headers, request)
    }
}

/// Why a model call failed. Each variant says what happened, where, and whether a
/// retry could help.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The server could not be reached.
    #[error(
        "{provider}: could not connect to {url}: {message}; check base_url and that the server is running"
    )]
    Connect {
        provider: String,
        url: String,
        message: String,
    },
    /// The server answered with an HTTP error status.
    #[error("{provider}: HTTP {status} from {url}: {message}")]
    Http {
        provider: String,
        url: String,
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// No answer (or no next chunk) within the configured time.
    #[error(
        "{provider}: no {phase} from {url} within {after:?}; raise the timeout or check the server"
    )]
    Timeout {
        provider: String,
        url: String,
        phase: String,
        after: Duration,
    },
    /// The stream itself reported an error after a successful HTTP status.
    #[error("{provider}: the stream from {url} reported an error: {message}")]
    Stream {
        provider: String,
        url: String,
        message: String,
        retryable: bool,
    },
    /// The response could not be understood.
    #[error("{provider}: malformed response from {url}: {message}")]
    Malformed {
        provider: String,
        url: String,
        message: String,
    },
    /// The provider is configured wrongly (missing key, bad URL).
    #[error("{provider}: configuration error: {message}")]
    Config { provider: String, message: String },
    /// The scripted model has no rule for the request it got.
    #[error("scripted model `{scenario}`: {message}")]
    Scripted { scenario: String, message: String },
}

/// How servers word "the request is longer than the model's context window" (OpenAI,
/// Anthropic, vLLM, llama.cpp, llama-cpp-python, Mistral, Groq, Ollama and others).
const CONTEXT_LENGTH_PHRASES: [&str; 12] = [
    "context length",
    "context_length",
    "context window",
    "context size",
    "exceed_context",
    "maximum context",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "reduce the length",
    "too large for model",
    "exceeds the model",
];

/// How servers word "this conversation repeats tool calls" when they refuse it
/// (DashScope: `InvalidParameter: Repetitive tool calls detected in the conversation
/// history`, as a 400 or a 500).
const REPETITION_PHRASES: [&str; 5] = [
    "repetitive tool call",
    "repeated tool call",
    "identical tool call",
    "tool call loop",
    "same tool call with identical",
];

impl ProviderError {
    /// True when the provider refused the request because the conversation repeats tool
    /// calls (a server-side loop guard): sending it again fails again.
    pub fn is_repetition_refusal(&self) -> bool {
        let message = match self {
            ProviderError::Http {
                status: 400..=599,
                message,
                ..
            }
            | ProviderError::Stream { message, .. } => message.to_lowercase(),
            _ => return false,
        };
        REPETITION_PHRASES.iter().any(|p| message.contains(p))
    }

    /// True when the provider refused the request because it does not fit the model's
    /// context window: sending less may succeed.
    pub fn is_context_length(&self) -> bool {
        let message = match self {
            ProviderError::Http {
                status: 400 | 413 | 422 | 500,
                message,
                ..
            }
            | ProviderError::Stream { message, .. } => message.to_lowercase(),
            _ => return false,
        };
        CONTEXT_LENGTH_PHRASES.iter().any(|p| message.contains(p))
    }

    /// True when the same request may succeed if sent again (before any token streamed).
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Connect { .. } | ProviderError::Timeout { .. } => true,
            ProviderError::Http { status, .. } => {
                (*status == 429 || *status >= 500)
                    && !self.is_context_length()
                    && !self.is_repetition_refusal()
            }
            ProviderError::Stream { retryable, .. } => *retryable,
            ProviderError::Malformed { .. }
            | ProviderError::Config { .. }
            | ProviderError::Scripted { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, message: &str) -> ProviderError {
        ProviderError::Http {
            provider: "p".into(),
            url: "http://127.0.0.1/v1".into(),
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// A provider that reads images and files.
    struct Seeing;

    impl Provider for Seeing {
        fn name(&self) -> &str {
            "seeing"
        }
        fn refuses(&self, _: &Attachment) -> Option<String> {
            None
        }
        fn stream<'a>(
            &'a self,
            _: CompletionRequest<'a>,
        ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
            Box::pin(async { Err(http(500, "not called")) })
        }
    }

    #[test]
    fn an_image_url_local_as_parsed_is_refused_before_any_model_call() {
        let with = |url: &str| {
            vec![Message::user_with(
                "look",
                vec![Attachment::Image {
                    url: url.into(),
                    detail: None,
                }],
            )]
        };
        // As a conversation stored before hosts were read as parsers read them holds it.
        let refused = Seeing.refuses_any(&with("https://0x7f.1/admin")).unwrap();
        assert!(refused.contains("local or private address"), "{refused}");
        assert_eq!(
            Seeing.refuses_any(&with("https://example.com/cat.png")),
            None
        );
        assert_eq!(
            Seeing.refuses_any(&with("data:image/png;base64,iVBORw0KGgo=")),
            None
        );
    }

    #[test]
    fn context_length_refusals_are_recognised_in_each_servers_words() {
        for (status, message) in [
            (
                400,
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. (code: context_length_exceeded)",
            ),
            (400, "prompt is too long: 215003 tokens > 200000 maximum"),
            (400, "Requested tokens (2361) exceed context window of 2048"),
            (
                400,
                "the request exceeds the available context size, try increasing it (type: exceed_context_size_error)",
            ),
            (
                400,
                "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens",
            ),
            (413, "Request too large: too many tokens"),
        ] {
            let e = http(status, message);
            assert!(e.is_context_length(), "{message}");
        }
        let in_stream = ProviderError::Stream {
            provider: "p".into(),
            url: "u".into(),
            message: "input is too long for requested model".into(),
            retryable: false,
        };
        assert!(in_stream.is_context_length());
    }

    #[test]
    fn a_servers_refusal_of_repeated_tool_calls_is_recognised_and_never_retried() {
        let dashscope = "<400> InternalError.Algo.InvalidParameter: Repetitive tool calls detected in the \
            conversation history. The same tool call with identical name and arguments has been repeated \
            across multiple consecutive rounds.";
        for status in [400, 500] {
            let e = http(status, dashscope);
            assert!(e.is_repetition_refusal() && !e.is_retryable(), "{status}");
        }
        assert!(!http(500, "internal error").is_repetition_refusal());
        assert!(!http(400, "invalid tool call arguments").is_repetition_refusal());
    }

    #[test]
    fn other_errors_are_not_context_length_refusals() {
        assert!(!http(400, "invalid value for 'temperature'").is_context_length());
        assert!(!http(401, "maximum context length: bad key").is_context_length());
        assert!(!http(429, "rate limited").is_context_length());
        let refused = http(500, "Requested tokens (9000) exceed context window of 8192");
        assert!(
            refused.is_context_length() && !refused.is_retryable(),
            "never resent as is"
        );
    }
}
