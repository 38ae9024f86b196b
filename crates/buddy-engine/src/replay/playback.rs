//! A model and a toolbox that play a tape back: the recorded replies in order, the
//! recorded results by call id. Anything the tape does not hold — a reply the recording
//! never asked for, a call it never ran — is "beyond the recording": the playback says
//! where, cancels the turn, and invents nothing.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use buddy_core::{
    BoxFuture, CallPurpose, CompletionRequest, FinishReason, Message, Provider, ProviderError,
    RepeatSemantics, SkillContext, Token, TokenStream, ToolCall, ToolOutcome, ToolSpec, Toolbox,
    Usage,
};
use tokio_util::sync::CancellationToken;

use crate::guards::canonical::canonical_args;
use crate::tape::{Tape, TapeStep, TapeTool};

/// Where a replay left the recording, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Beyond {
    /// Model calls the replay had made when it left the recording.
    pub after_model_call: u32,
    /// What the replay needed that the recording does not hold.
    pub wanted: Wanted,
    /// The same, in words.
    pub why: String,
}

/// What a replay needed beyond the recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wanted {
    /// The final answer (a Finalize call): where and why the turn stops is known.
    FinalAnswer,
    /// Another reply of the model: the turn would go on.
    Reply,
    /// The result of a call the recording did not run.
    ToolResult,
}

/// What a playback found, shared by its model and its toolbox.
#[derive(Debug, Default)]
pub(crate) struct Playback {
    pub beyond: Option<Beyond>,
    /// Model calls answered so far.
    pub model_calls: u32,
}

/// The shared state of one replay.
#[derive(Clone)]
pub(crate) struct Shared {
    state: Arc<Mutex<Playback>>,
    cancel: CancellationToken,
}

impl Shared {
    pub(crate) fn new(cancel: CancellationToken) -> Self {
        Shared {
            state: Arc::default(),
            cancel,
        }
    }

    /// Marks the replay as beyond the recording (the first time only) and stops the turn.
    fn beyond(&self, wanted: Wanted, why: String) {
        if let Ok(mut state) = self.state.lock()
            && state.beyond.is_none()
        {
            state.beyond = Some(Beyond {
                after_model_call: state.model_calls,
                wanted,
                why,
            });
        }
        self.cancel.cancel();
    }

    fn model_calls(&self) -> u32 {
        self.state.lock().map(|s| s.model_calls).unwrap_or(0)
    }

    /// What the playback found, once the turn is over.
    pub(crate) fn finish(&self) -> Option<Beyond> {
        self.state.lock().ok().and_then(|s| s.beyond.clone())
    }
}

/// One model call as recorded.
#[derive(Clone, Debug)]
enum Played {
    Reply {
        purpose: CallPurpose,
        text: String,
        calls: Vec<ToolCall>,
        finish: Option<FinishReason>,
        usage: Option<Usage>,
        chanted: Option<String>,
    },
    Failed {
        purpose: CallPurpose,
        error: ProviderError,
    },
}

/// A model that answers with the tape's replies, in order.
pub(crate) struct PlaybackModel {
    calls: Vec<Played>,
    next: Mutex<usize>,
    shared: Shared,
}

/// A tool's recorded result.
#[derive(Clone, Debug)]
struct Recorded {
    name: String,
    canonical: String,
    outcome: ToolOutcome,
}

/// A toolbox that answers with the tape's results.
pub(crate) struct PlaybackTools {
    specs: Vec<ToolSpec>,
    semantics: HashMap<String, RepeatSemantics>,
    external: HashSet<String>,
    results: Arc<HashMap<String, Recorded>>,
    /// Tool lists that replaced this one mid-turn: (before model call, toolbox).
    generations: Vec<(u32, Arc<PlaybackTools>)>,
    shared: Shared,
}

/// Why a tape cannot be played back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TapeError {
    #[error(
        "the tape is version {found}; this buddy replays version {expected}: record the turn again"
    )]
    Version { found: u32, expected: u32 },
    #[error(
        "the tape points at message {at} of the turn, which has {len}: the stored conversation does not match its tape"
    )]
    Missing { at: usize, len: usize },
}

/// The model and toolbox that play `tape` back against the turn's `new_messages`.
pub(crate) fn playback(
    tape: &Tape,
    new_messages: &[Message],
    shared: &Shared,
) -> Result<(PlaybackModel, PlaybackTools), TapeError> {
    if tape.version != crate::tape::TAPE_VERSION {
        return Err(TapeError::Version {
            found: tape.version,
            expected: crate::tape::TAPE_VERSION,
        });
    }
    let missing = |at: usize| TapeError::Missing {
        at,
        len: new_messages.len(),
    };
    let mut played = Vec::new();
    let mut results = HashMap::new();
    let mut names: HashMap<String, String> = HashMap::new();
    let mut changes = Vec::new();
    for step in &tape.steps {
        match step {
            TapeStep::Reply {
                purpose,
                text,
                calls,
                finish,
                usage,
                chanted,
            } => {
                let calls = Tape::calls_of(calls, new_messages).ok_or_else(|| {
                    missing(match calls {
                        crate::tape::TapeCalls::Message(n) => *n,
                        crate::tape::TapeCalls::Inline(_) => 0,
                    })
                })?;
                for call in calls {
                    names.insert(call.id.clone(), call.name.clone());
                }
                played.push(Played::Reply {
                    purpose: *purpose,
                    text: text.clone(),
                    calls: calls.to_vec(),
                    finish: finish.clone(),
                    usage: *usage,
                    chanted: chanted.clone(),
                });
            }
            TapeStep::Failed {
                purpose,
                message,
                context_length,
                provider,
                url,
                status,
            } => played.push(Played::Failed {
                purpose: *purpose,
                error: recorded_error(message, *context_length, provider, url, *status),
            }),
            TapeStep::Result {
                call_id,
                at,
                is_error,
                fatal,
            } => {
                let Some(Message::Tool { content, .. }) = new_messages.get(*at) else {
                    return Err(missing(*at));
                };
                results.insert(call_id.clone(), (content.clone(), *is_error, *fatal));
            }
            TapeStep::Tools { before_call, tools } => changes.push((*before_call, tools.clone())),
            TapeStep::Interrupted { .. } | TapeStep::Trip { .. } => {}
        }
    }
    // Each result with the call it answers, so a `pure` repeat can be answered from it.
    let mut calls_by_id: HashMap<String, String> = HashMap::new();
    for call in played.iter().flat_map(|p| match p {
        Played::Reply { calls, .. } => calls.as_slice(),
        Played::Failed { .. } => &[],
    }) {
        calls_by_id.insert(call.id.clone(), canonical_args(&call.arguments));
    }
    let results: HashMap<String, Recorded> = results
        .into_iter()
        .map(|(id, (content, is_error, fatal))| {
            let recorded = Recorded {
                name: names.get(&id).cloned().unwrap_or_default(),
                canonical: calls_by_id.get(&id).cloned().unwrap_or_default(),
                outcome: ToolOutcome {
                    content,
                    is_error,
                    fatal,
                },
            };
            (id, recorded)
        })
        .collect();
    let results = Arc::new(results);
    let generations = changes
        .into_iter()
        .map(|(before, tools)| {
            (
                before,
                Arc::new(PlaybackTools::of(&tools, &results, Vec::new(), shared)),
            )
        })
        .collect();
    let tools = PlaybackTools::of(&tape.tools, &results, generations, shared);
    let model = PlaybackModel {
        calls: played,
        next: Mutex::new(0),
        shared: shared.clone(),
    };
    Ok((model, tools))
}

impl PlaybackTools {
    fn of(
        tools: &[TapeTool],
        results: &Arc<HashMap<String, Recorded>>,
        generations: Vec<(u32, Arc<PlaybackTools>)>,
        shared: &Shared,
    ) -> Self {
        PlaybackTools {
            specs: tools.iter().map(|t| t.spec.clone()).collect(),
            semantics: tools
                .iter()
                .map(|t| (t.spec.name.clone(), t.semantics))
                .collect(),
            external: tools
                .iter()
                .filter(|t| t.external)
                .map(|t| t.spec.name.clone())
                .collect(),
            results: Arc::clone(results),
            generations,
            shared: shared.clone(),
        }
    }
}

/// What a call of `purpose` wants from the recording.
fn wanted(purpose: CallPurpose) -> Wanted {
    match purpose {
        CallPurpose::Finalize => Wanted::FinalAnswer,
        CallPurpose::Turn | CallPurpose::Reask => Wanted::Reply,
    }
}

/// The purpose as a person reads it.
fn purpose_words(purpose: CallPurpose) -> &'static str {
    match purpose {
        CallPurpose::Turn => "a reply with tools on offer",
        CallPurpose::Finalize => "the final answer without tools",
        CallPurpose::Reask => "a reply asked for again",
    }
}

impl Provider for PlaybackModel {
    fn name(&self) -> &str {
        "replay"
    }

    /// Recorded replies are played back whatever the settings.
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
        let index = match self.next.lock() {
            Ok(mut next) => {
                *next += 1;
                *next - 1
            }
            Err(_) => usize::MAX,
        };
        let number = index.saturating_add(1);
        let result = match self.calls.get(index) {
            None => {
                self.shared.beyond(
                    wanted(request.purpose),
                    format!(
                        "the recording has no model call {number}: the turn would go on asking for {}",
                        purpose_words(request.purpose)
                    ),
                );
                Err(edge())
            }
            Some(Played::Reply { purpose, .. } | Played::Failed { purpose, .. })
                if *purpose != request.purpose =>
            {
                self.shared.beyond(
                    wanted(request.purpose),
                    format!(
                        "model call {number} asks for {} where the recording asked for {}",
                        purpose_words(request.purpose),
                        purpose_words(*purpose)
                    ),
                );
                Err(edge())
            }
            Some(Played::Failed { error, .. }) => {
                self.count();
                Err(error.clone())
            }
            Some(Played::Reply {
                text,
                calls,
                finish,
                usage,
                chanted,
                ..
            }) => {
                self.count();
                let mut tokens: Vec<Result<Token, ProviderError>> = Vec::new();
                match chanted {
                    Some(streamed) => {
                        tokens.push(Ok(Token::Text {
                            text: streamed.clone(),
                        }));
                        // buddy cut this reply for chanting and read no further: reading on
                        // leaves the recording.
                        let shared = self.shared.clone();
                        let tail = futures::stream::once(async move {
                            shared.beyond(
                                Wanted::Reply,
                                format!(
                                    "model call {number} was cut for chanting when recorded; its rest was never read"
                                ),
                            );
                            Err(edge())
                        });
                        let head = futures::stream::iter(tokens);
                        return Box::pin(async move {
                            Ok(Box::pin(futures::StreamExt::chain(head, tail)) as TokenStream)
                        });
                    }
                    None => {
                        if !text.is_empty() {
                            tokens.push(Ok(Token::Text { text: text.clone() }));
                        }
                        tokens.extend(calls.iter().cloned().map(|c| Ok(Token::ToolCall(c))));
                        if let Some(reason) = finish.clone() {
                            tokens.push(Ok(Token::Finish {
                                reason,
                                usage: *usage,
                            }));
                        }
                    }
                }
                Ok(tokens)
            }
        };
        Box::pin(async move {
            let tokens = result?;
            Ok(Box::pin(futures::stream::iter(tokens)) as TokenStream)
        })
    }
}

impl PlaybackModel {
    fn count(&self) {
        if let Ok(mut state) = self.shared.state.lock() {
            state.model_calls += 1;
        }
    }
}

/// The error a recorded failure stands for: the same error where the tape kept its
/// parts; for older tapes, one that is classified alike (too long, or not).
fn recorded_error(
    message: &str,
    context_length: bool,
    provider: &Option<String>,
    url: &Option<String>,
    status: Option<u16>,
) -> ProviderError {
    let provider = provider.clone().unwrap_or_else(|| "replay".to_owned());
    let url = url.clone().unwrap_or_else(|| "the recording".to_owned());
    match status {
        Some(status) => ProviderError::Http {
            provider,
            url,
            status,
            message: message.to_owned(),
            retry_after: None,
        },
        None if context_length => ProviderError::Http {
            provider,
            url,
            status: 400,
            message: message.to_owned(),
            retry_after: None,
        },
        None => ProviderError::Stream {
            provider,
            url,
            message: message.to_owned(),
            retryable: false,
        },
    }
}

/// The error a playback returns where the recording ends (the turn is cancelled too).
fn edge() -> ProviderError {
    ProviderError::Scripted {
        scenario: "replay".into(),
        message: "beyond the recording".into(),
    }
}

impl Toolbox for PlaybackTools {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    fn semantics(&self, name: &str) -> Option<RepeatSemantics> {
        self.semantics.get(name).copied()
    }

    fn is_external(&self, name: &str) -> bool {
        self.external.contains(name)
    }

    fn invoke<'a>(&'a self, call: &'a ToolCall, _ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        let outcome = match self.results.get(&call.id) {
            Some(recorded) => recorded.outcome.clone(),
            None => {
                // Same arguments, same answer within a turn: that is what `pure` declares.
                let canonical = canonical_args(&call.arguments);
                let pure_twin = (self.semantics(&call.name) == Some(RepeatSemantics::Pure))
                    .then(|| {
                        self.results
                            .values()
                            .find(|r| r.name == call.name && r.canonical == canonical)
                    })
                    .flatten();
                match pure_twin {
                    Some(recorded) => recorded.outcome.clone(),
                    None => {
                        self.shared.beyond(
                            Wanted::ToolResult,
                            format!(
                                "call `{}` ({}) was not run in the recording, so its result is unknown",
                                call.id, call.name
                            ),
                        );
                        ToolOutcome::error("beyond the recording")
                    }
                }
            }
        };
        Box::pin(async move { outcome })
    }

    fn resume<'a>(
        &'a self,
        call: &'a ToolCall,
        _task: &'a buddy_core::RecordedTask,
        _ctx: SkillContext,
    ) -> Option<BoxFuture<'a, ToolOutcome>> {
        let outcome = self.results.get(&call.id)?.outcome.clone();
        Some(Box::pin(async move { outcome }))
    }

    fn latest(&self) -> BoxFuture<'_, Option<(u64, Arc<dyn Toolbox>)>> {
        let next_call = self.shared.model_calls() + 1;
        let current = self
            .generations
            .iter()
            .enumerate()
            .rfind(|(_, (before, _))| *before <= next_call)
            .map(|(i, (_, tools))| (i as u64 + 1, Arc::clone(tools) as Arc<dyn Toolbox>));
        Box::pin(async move { current })
    }
}
