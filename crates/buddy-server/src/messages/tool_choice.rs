//! The client's `tool_choice` on the calls buddy makes for it. A call passed through to
//! an Anthropic upstream as the client's bytes carries it as sent; every other call of
//! the turn to a translated upstream is made to honour it here:
//!
//! - `any`: the turn's first call asks for a tool (`required`);
//! - `tool`: the turn's first call offers that tool alone and asks for it — forcing one
//!   named tool the way every model server can;
//! - `none`: no call may use a tool (the client's tools are not offered at all, and buddy's
//!   own are refused by `tool_choice: none`);
//! - `disable_parallel_tool_use`: a reply keeps its first tool call only (the client
//!   sends back the one result; the call it never saw is not in its history).
//!
//! Anthropic's `tool_choice` holds for the one reply a request gets; buddy's turn may make
//! several calls (its own skills between them), so forcing holds for the turn's first.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use buddy_anthropic_wire::ToolChoice as Asked;
use buddy_core::{
    Attachment, BoxFuture, CallPurpose, CompletionRequest, Provider, ProviderError, Sampling,
    ServedBy, Token, TokenStream, ToolChoice, ToolSpec, Wire,
};
use futures::StreamExt;

/// What the turn's calls are made to do.
#[derive(Clone, Debug, PartialEq)]
enum Force {
    /// The model chooses.
    Nothing,
    /// The first call must call a tool.
    AnyTool,
    /// The first call must call this tool.
    Tool(String),
    /// No call may use a tool.
    NoTool,
}

/// The resolved provider, made to honour the client's `tool_choice`.
pub(crate) struct ClientChoice {
    inner: Arc<dyn Provider>,
    force: Force,
    /// Whether a reply keeps its first tool call only.
    one_call: bool,
    /// Whether the forced call was made.
    forced: AtomicBool,
}

/// A `tool_choice` naming a tool the request does not declare: what Anthropic refuses.
pub(crate) fn unknown_tool(asked: Option<&Asked>, declared: &[ToolSpec]) -> Option<String> {
    let Some(Asked::Tool { name, .. }) = asked else {
        return None;
    };
    (!declared.iter().any(|t| &t.name == name))
        .then(|| format!("tool_choice: the request's tools have no tool named `{name}`"))
}

impl ClientChoice {
    /// `inner`, honouring `asked`.
    pub(crate) fn new(inner: Arc<dyn Provider>, asked: Option<&Asked>) -> Self {
        let (force, one_call) = match asked {
            None => (Force::Nothing, false),
            Some(Asked::Auto {
                disable_parallel_tool_use,
            }) => (Force::Nothing, *disable_parallel_tool_use),
            Some(Asked::Any {
                disable_parallel_tool_use,
            }) => (Force::AnyTool, *disable_parallel_tool_use),
            Some(Asked::Tool {
                name,
                disable_parallel_tool_use,
            }) => (Force::Tool(name.clone()), *disable_parallel_tool_use),
            Some(Asked::None) => (Force::NoTool, false),
        };
        ClientChoice {
            inner,
            force,
            one_call,
            forced: AtomicBool::new(false),
        }
    }

    /// Whether anything is asked of the calls at all.
    pub(crate) fn asks(&self) -> bool {
        self.force != Force::Nothing || self.one_call
    }

    /// The `tool_choice` and tools `request` is made with: only a round of the turn is
    /// forced (never buddy's final-answer call, which offers no tool), and only once.
    fn choice<'r>(&self, request: &CompletionRequest<'r>) -> Option<(ToolChoice, Vec<ToolSpec>)> {
        let round = request.purpose == CallPurpose::Turn
            && matches!(request.tool_choice, None | Some(ToolChoice::Auto));
        let tools = request.tools.unwrap_or_default();
        if !round || tools.is_empty() {
            return None;
        }
        let once = || !self.forced.swap(true, Ordering::SeqCst);
        match &self.force {
            Force::Nothing => None,
            Force::NoTool => Some((ToolChoice::None, tools.to_vec())),
            Force::AnyTool => once().then(|| (ToolChoice::Required, tools.to_vec())),
            Force::Tool(name) => once().then(|| {
                let only = tools.iter().filter(|t| &t.name == name).cloned();
                (ToolChoice::Required, only.collect())
            }),
        }
    }

    /// `stream` with its tool calls after the first left out, when the client asked so.
    fn one_call_only(&self, stream: TokenStream) -> TokenStream {
        if !self.one_call {
            return stream;
        }
        let mut seen = false;
        stream
            .filter(move |token| {
                let call = matches!(token, Ok(Token::ToolCall(_)));
                let keep = !call || !std::mem::replace(&mut seen, true);
                std::future::ready(keep)
            })
            .boxed()
    }
}

impl Provider for ClientChoice {
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

    fn forward_exact<'a>(
        &'a self,
        wire: Wire,
        body: Vec<u8>,
        stream: bool,
        headers: Vec<(String, String)>,
        request: CompletionRequest<'a>,
    ) -> Option<BoxFuture<'a, Result<TokenStream, ProviderError>>> {
        // The client's bytes carry its `tool_choice`: the upstream honours it, and this
        // was the call to force.
        let round = request.clone();
        let sent = self
            .inner
            .forward_exact(wire, body, stream, headers, request)?;
        self.choice(&round);
        Some(Box::pin(async move { Ok(self.one_call_only(sent.await?)) }))
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        Box::pin(async move {
            let stream = match self.choice(&request) {
                Some((choice, tools)) => {
                    let forced = CompletionRequest {
                        tools: Some(&tools),
                        tool_choice: Some(choice),
                        ..request
                    };
                    self.inner.stream(forced).await?
                }
                None => self.inner.stream(request).await?,
            };
            Ok(self.one_call_only(stream))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use buddy_core::{Message, ToolCall};
    use serde_json::json;
    use std::sync::Mutex;

    /// A model server that records the choice and tools of each call and answers with
    /// two tool calls.
    #[derive(Default)]
    struct Recording(Mutex<Vec<(Option<ToolChoice>, Vec<String>)>>);

    impl Provider for Recording {
        fn name(&self) -> &str {
            "recording"
        }

        fn stream<'a>(
            &'a self,
            request: CompletionRequest<'a>,
        ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
            let names = request.tools.unwrap_or_default().iter();
            let names = names.map(|t| t.name.clone()).collect();
            self.0.lock().unwrap().push((request.tool_choice, names));
            let tokens = vec![
                Ok(Token::ToolCall(ToolCall::new("a", "Bash", "{}"))),
                Ok(Token::ToolCall(ToolCall::new("b", "Read", "{}"))),
            ];
            Box::pin(async move { Ok(futures::stream::iter(tokens).boxed()) })
        }
    }

    fn tools() -> Vec<ToolSpec> {
        ["Bash", "Read"]
            .map(|name| ToolSpec {
                name: name.into(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            })
            .to_vec()
    }

    /// Two rounds and a final-answer call under `asked`: what the model server was asked
    /// each time, and how many tool calls the first reply kept.
    async fn calls(asked: serde_json::Value) -> (Vec<(Option<ToolChoice>, Vec<String>)>, usize) {
        let asked: Asked = serde_json::from_value(asked).unwrap();
        let inner = Arc::new(Recording::default());
        let choice = ClientChoice::new(Arc::clone(&inner) as Arc<dyn Provider>, Some(&asked));
        let (tools, messages) = (tools(), vec![Message::user("hi")]);
        let round = CompletionRequest::new("m", &messages).with_tools(&tools);
        let first = choice.stream(round.clone()).await.unwrap();
        let kept = first.collect::<Vec<_>>().await.len();
        let _ = choice.stream(round.clone()).await.unwrap();
        let finalize = CompletionRequest {
            tool_choice: Some(ToolChoice::None),
            purpose: CallPurpose::Finalize,
            ..round
        };
        let _ = choice.stream(finalize).await.unwrap();
        let asked = inner.0.lock().unwrap().clone();
        (asked, kept)
    }

    #[tokio::test]
    async fn each_tool_choice_is_honoured_on_the_turns_calls() {
        let both = || vec!["Bash".to_owned(), "Read".to_owned()];
        let finalize = (Some(ToolChoice::None), both());
        let (any, kept) = calls(json!({"type": "any"})).await;
        assert_eq!(
            any,
            [
                (Some(ToolChoice::Required), both()),
                (None, both()),
                finalize.clone()
            ]
        );
        assert_eq!(kept, 2);
        let (tool, kept) = calls(json!({"type": "tool", "name": "Read",
            "disable_parallel_tool_use": true}))
        .await;
        assert_eq!(
            tool,
            [
                (Some(ToolChoice::Required), vec!["Read".to_owned()]),
                (None, both()),
                finalize.clone()
            ]
        );
        assert_eq!(kept, 1, "one call at a time");
        let (none, _) = calls(json!({"type": "none"})).await;
        assert_eq!(
            none,
            [
                (Some(ToolChoice::None), both()),
                (Some(ToolChoice::None), both()),
                finalize.clone()
            ]
        );
        let (auto, kept) = calls(json!({"type": "auto"})).await;
        assert_eq!(auto, [(None, both()), (None, both()), finalize]);
        assert_eq!(kept, 2);
    }

    #[test]
    fn a_tool_choice_naming_no_declared_tool_is_refused() {
        let named = |name: &str| Asked::Tool {
            name: name.into(),
            disable_parallel_tool_use: false,
        };
        assert_eq!(unknown_tool(Some(&named("Read")), &tools()), None);
        assert_eq!(
            unknown_tool(Some(&named("Grep")), &tools()).unwrap(),
            "tool_choice: the request's tools have no tool named `Grep`"
        );
        assert_eq!(unknown_tool(None, &[]), None);
    }
}
