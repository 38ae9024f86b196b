//! What a tracer sees of a turn: the engine tells an observer when a model call starts
//! and ends and hands it every event, and sends the trace context it gets back on to the
//! model server and the tools. The engine knows this trait, never a tracing library.

use crate::{ChatEvent, CompletionRequest, FinishReason, ResponseInfo, ToolCall, Usage, Usd};

/// Watches one turn, for tracing. Every method is called on the turn's own task, in the
/// order things happen; an observer must not block.
pub trait TurnObserver: Send + Sync {
    /// A model call is about to be sent; returns the W3C trace context to send with it.
    fn model_call_started(&self, request: &CompletionRequest<'_>) -> Option<TraceContext>;

    /// The server of the model call started last said what its reply is (a
    /// [`crate::Token::Response`]); comes before `model_call_ended`. The default ignores it.
    fn model_call_response(&self, _response: &ResponseInfo) {}

    /// The model call started last is over, with a reply or not.
    fn model_call_ended(&self, end: &ModelCallEnd<'_>);

    /// An event of the turn, as it is emitted (tool calls start and end, guard trips, the
    /// terminal event).
    fn event(&self, event: &ChatEvent);

    /// The W3C `traceparent` to send with tool call `call_id` (started by its event).
    fn tool_traceparent(&self, call_id: &str) -> Option<String>;

    /// An observer for the sub-agent `agent` started by tool call `call_id`, nested under
    /// that call (an `invoke_agent` span); `None`, the default, leaves it untraced.
    fn sub_agent(&self, _call_id: &str, _agent: &str) -> Option<std::sync::Arc<dyn TurnObserver>> {
        None
    }
}

/// The W3C trace context headers of a call: `traceparent`, and the caller's
/// `tracestate` passed on with it when there was one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceContext {
    pub traceparent: String,
    pub tracestate: Option<String>,
}

/// How a model call ended, for an observer.
#[derive(Clone, Debug, Default)]
pub struct ModelCallEnd<'a> {
    /// The reply's text (empty when there was no reply).
    pub text: &'a str,
    pub tool_calls: &'a [ToolCall],
    pub finish: Option<&'a FinishReason>,
    /// This call's usage (as reported, or as buddy counted it).
    pub usage: Option<Usage>,
    pub cost: Option<Usd>,
    /// Why there was no reply, low-cardinality (`cancelled`, `deadline`, `provider_error`,
    /// `context_overflow`, `invalid_request`); `None` when there was one.
    pub error: Option<&'static str>,
    /// The error in words, when there was one.
    pub message: Option<String>,
}
