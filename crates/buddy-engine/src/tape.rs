//! The tape of a turn: everything the turn received from outside — the model's replies
//! (as the model sent them, before buddy changed anything), the tools' results, the tool
//! list when it changed — in order, with the policy it ran under. Replay plays a tape
//! back through the engine under another policy without calling the model or any tool.
//!
//! A tape points into the turn's own messages where they hold what it needs byte for
//! byte (a tool's result, a reply's calls), so it costs little beside the history; keep
//! it with those messages (the store does, and `buddy run --json` writes both).

use buddy_core::{
    CallPurpose, FinishReason, GuardAction, GuardKind, Message, ProviderError, RepeatSemantics,
    StopReason, ToolCall, ToolSpec, Usage,
};
use serde::{Deserialize, Serialize};

use crate::approval::{ApprovalRules, CallDecision};
use crate::policy::LoopPolicy;

/// The tape format's version; replay refuses a tape of another version.
pub const TAPE_VERSION: u32 = 1;

/// What a turn received from outside, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tape {
    pub version: u32,
    pub model: String,
    pub policy: LoopPolicy,
    pub approval: ApprovalRules,
    /// The tools on offer when the turn started.
    pub tools: Vec<TapeTool>,
    pub entry: TapeEntry,
    /// Messages before the turn (the turn's request history).
    pub given: usize,
    pub steps: Vec<TapeStep>,
    /// Messages the turn added; tape references count from the first of them.
    pub new_messages: usize,
    /// How the turn ended.
    pub ended: Option<TapeEnd>,
    /// Calls a crash left open that the turn waited on again (their tasks, by call id);
    /// their results are `Result` steps.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub resumed: std::collections::BTreeMap<String, buddy_core::RecordedTask>,
}

/// One tool as the turn saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TapeTool {
    pub spec: ToolSpec,
    pub semantics: RepeatSemantics,
    /// Run by the client, not by buddy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external: bool,
}

/// How the turn began.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TapeEntry {
    /// A user message; `user_at` is its index among the new messages when the turn added it.
    NewMessage { user_at: Option<usize> },
    /// A person's decisions about the calls a paused turn waited for.
    Decisions { decisions: Vec<CallDecision> },
    /// A capped turn given a fresh budget.
    Continue,
    /// The client ran its tools and sent their results back.
    ClientResults,
}

/// One thing the turn received.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TapeStep {
    /// A model reply, as the model sent it.
    Reply {
        purpose: CallPurpose,
        text: String,
        calls: TapeCalls,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        finish: Option<FinishReason>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// The text as it streamed when buddy cut it for chanting (it read no further).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chanted: Option<String>,
    },
    /// A model call that failed.
    Failed {
        purpose: CallPurpose,
        /// The error's message (for an HTTP or stream error, as the server gave it).
        message: String,
        /// The provider refused the request as too long for the model's window.
        context_length: bool,
        /// Where the error came from, so a replay gives back the same error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// The HTTP status of an HTTP error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
    },
    /// A tool's result: the content of new message `at`.
    Result {
        call_id: String,
        at: usize,
        is_error: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        fatal: bool,
    },
    /// The tool list changed (an MCP server's tools changed) before model call `before_call`.
    Tools {
        before_call: u32,
        tools: Vec<TapeTool>,
    },
    /// The turn was cut here by the clock or the caller; replay does not simulate either.
    Interrupted { cause: Interruption },
    /// A guard acted (what happened, to compare a replay with).
    Trip {
        guard: GuardKind,
        action: GuardAction,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skill: Option<String>,
        /// Model calls made when it acted.
        model_call: u32,
        /// Why, in words.
        detail: String,
        /// The calls that made it act (result excerpts).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evidence: Vec<buddy_core::Evidence>,
    },
}

/// What cut a turn short outside the judge's reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interruption {
    Cancelled,
    Deadline,
}

/// A reply's calls: inline, or the calls of new message `n` (the usual case: buddy put
/// them into the history as the model sent them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TapeCalls {
    Inline(Vec<ToolCall>),
    Message(usize),
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TapeEnd {
    pub reason: StopReason,
    pub model_calls: u32,
    pub tool_calls: u32,
}

impl TapeStep {
    /// The step that records a failed model call.
    pub(crate) fn failed(purpose: CallPurpose, error: &ProviderError) -> TapeStep {
        let (provider, url, status, message) = match error {
            ProviderError::Http {
                provider,
                url,
                status,
                message,
                ..
            } => (Some(provider), Some(url), Some(*status), message.clone()),
            ProviderError::Stream {
                provider,
                url,
                message,
                ..
            } => (Some(provider), Some(url), None, message.clone()),
            other => (None, None, None, other.to_string()),
        };
        TapeStep::Failed {
            purpose,
            message,
            context_length: error.is_context_length(),
            provider: provider.cloned(),
            url: url.cloned(),
            status,
        }
    }
}

impl Tape {
    /// An empty tape for a turn of `model` under `policy`.
    pub(crate) fn new(
        model: &str,
        policy: &LoopPolicy,
        approval: &ApprovalRules,
        entry: TapeEntry,
        given: usize,
    ) -> Self {
        Tape {
            version: TAPE_VERSION,
            model: model.to_owned(),
            policy: policy.clone(),
            approval: approval.clone(),
            tools: Vec::new(),
            entry,
            given,
            steps: Vec::new(),
            new_messages: 0,
            ended: None,
            resumed: std::collections::BTreeMap::new(),
        }
    }

    /// Records a reply and returns its step's index (its calls are settled later).
    pub(crate) fn reply(
        &mut self,
        purpose: CallPurpose,
        text: &str,
        finish: Option<FinishReason>,
        usage: Option<Usage>,
        chanted: Option<String>,
    ) -> usize {
        self.steps.push(TapeStep::Reply {
            purpose,
            text: text.to_owned(),
            calls: TapeCalls::Inline(Vec::new()),
            finish,
            usage,
            chanted,
        });
        self.steps.len() - 1
    }

    /// Settles the calls of the reply at step `step`.
    pub(crate) fn settle_calls(&mut self, step: usize, settled: TapeCalls) {
        if let Some(TapeStep::Reply { calls, .. }) = self.steps.get_mut(step) {
            *calls = settled;
        }
    }

    /// The calls of a reply step, resolved against the turn's new messages.
    pub fn calls_of<'a>(
        calls: &'a TapeCalls,
        new_messages: &'a [Message],
    ) -> Option<&'a [ToolCall]> {
        match calls {
            TapeCalls::Inline(calls) => Some(calls),
            TapeCalls::Message(n) => match new_messages.get(*n)? {
                Message::Assistant { tool_calls, .. } => Some(tool_calls),
                _ => None,
            },
        }
    }

    /// Model calls the tape holds a reply (or failure) for.
    pub fn model_calls(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, TapeStep::Reply { .. } | TapeStep::Failed { .. }))
            .count()
    }
}

/// The tools of `toolbox` as a tape keeps them.
pub(crate) fn tools_of(toolbox: &dyn buddy_core::Toolbox) -> Vec<TapeTool> {
    toolbox
        .specs()
        .iter()
        .map(|spec| TapeTool {
            spec: spec.clone(),
            semantics: toolbox.semantics(&spec.name).unwrap_or_default(),
            external: toolbox.is_external(&spec.name),
        })
        .collect()
}

/// A recorded turn: its tape and the conversation around it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    pub tape: Tape,
    /// The conversation before the turn.
    pub history: Vec<Message>,
    /// The messages the turn added, in order (the tape points into them).
    pub new_messages: Vec<Message>,
}

impl Recording {
    /// A recording from a conversation's messages: `messages` holds the turn's new
    /// messages last (the store keeps them in order), so the history is what precedes them.
    pub fn from_conversation(tape: Tape, messages: &[Message], end: usize) -> Option<Recording> {
        let start = end.checked_sub(tape.new_messages)?;
        Some(Recording {
            history: messages.get(..start)?.to_vec(),
            new_messages: messages.get(start..end)?.to_vec(),
            tape,
        })
    }
}
