//! What an endpoint asks of the turn service: a typed [`TurnSpec`] in, a
//! [`StartedTurn`] out.

use buddy_core::{ChatEvent, Message, Sampling};
use buddy_engine::{PolicyPatch, Resume};
use tokio_util::sync::CancellationToken;

use crate::backend::Resolved;
use crate::turn_log::Watch;

/// Where a turn's conversation lives.
pub(crate) enum Conversation {
    /// In the store: an existing id, or a new conversation.
    Stored(Option<String>),
    /// Only in the request (the OpenAI endpoint: clients send the whole history).
    Ephemeral(Vec<Message>),
    /// After turn `after` of a stored conversation (a response's `previous_response_id`):
    /// the turn's context is that turn's chain of ancestors. It goes on in the same
    /// conversation when `after` is its last turn and no turn runs there; otherwise it
    /// starts a branch — a new conversation holding the history up to `after`.
    After { conversation: String, after: String },
}

/// Which API family asks: it decides who can answer an approval question.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Family {
    /// buddy's own API: a client answers approvals at `/v1/conversations/{id}/resume`.
    #[default]
    Native,
    /// An OpenAI-compatible API: no client can answer an approval question.
    OpenAi,
}

/// One turn as an endpoint asks for it, typed once.
pub(crate) struct TurnSpec {
    pub conversation: Conversation,
    /// What the user said (`None` for a resume, or when `append` carries the input).
    pub user_message: Option<String>,
    /// The provider, tools and model the request resolved to.
    pub resolved: Resolved,
    /// The request's own policy: it may only lower the operator's.
    pub policy: PolicyPatch,
    /// Added to the conversation (and stored with it) before the turn: the Responses
    /// API's input items, such as the results of tools the client ran.
    pub append: Vec<Message>,
    /// A system prompt used for this turn and not stored (`instructions`).
    pub instructions: Option<String>,
    /// Goes on with the conversation's paused or capped turn instead of a new message.
    pub resume: Option<Resume>,
    pub family: Family,
    /// Hand the turn's whole conversation back when it ends (`StartedTurn::messages`):
    /// for a conversation the caller holds itself.
    pub keep_messages: bool,
    /// The client's sampling and output settings (temperature, structured output, …).
    pub sampling: Sampling,
    /// New settings (checked) kept with the conversation for this and later turns.
    pub settings: Option<serde_json::Value>,
    /// The client's prompt-cache key (`prompt_cache_key`), sent with every model call of
    /// the turn; `None`: one buddy derives from the conversation.
    pub cache_key: Option<String>,
}

impl TurnSpec {
    /// A turn of `conversation` on `resolved` under the request's `policy`; the rest as
    /// a plain native turn has it.
    pub(crate) fn new(conversation: Conversation, resolved: Resolved, policy: PolicyPatch) -> Self {
        TurnSpec {
            conversation,
            user_message: None,
            resolved,
            policy,
            append: Vec::new(),
            instructions: None,
            resume: None,
            family: Family::Native,
            keep_messages: false,
            sampling: Sampling::default(),
            settings: None,
            cache_key: None,
        }
    }
}

/// A running turn, as an endpoint sees it.
pub(crate) struct StartedTurn {
    /// The turn's events from the first: this request's watch of the turn's log.
    pub events: Watch<ChatEvent>,
    /// Cancels the turn (a client that went away, where the server is set to).
    pub cancel: CancellationToken,
    pub conversation_id: Option<String>,
    pub turn_id: String,
    pub model: String,
    /// The whole conversation once the turn has ended (asked for with
    /// `TurnSpec::keep_messages`).
    pub messages: Option<tokio::sync::oneshot::Receiver<Vec<Message>>>,
}
