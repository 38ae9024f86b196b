//! What an endpoint asks of the turn service: a typed [`TurnSpec`] in, a
//! [`StartedTurn`] out.

use std::sync::Arc;

use buddy_core::{ChatEvent, Message, Provider, Sampling, ToolSpec};
use buddy_engine::{PolicyPatch, Resume};
use tokio_util::sync::CancellationToken;

use crate::conversation_settings::ConversationSettings;
use crate::request_mcp::RequestMcp;
use crate::turn_log::Watch;

/// Where a turn's conversation lives.
pub(crate) enum Conversation {
    /// In the store: an existing id, or a new conversation.
    Stored(Option<String>),
    /// Only in the request (the OpenAI endpoint: clients send the whole history).
    Ephemeral(Vec<Message>),
    /// The request's whole history, of a client session buddy keeps as a conversation
    /// (guard mode): the turn runs on `history` as sent, and what it adds to the
    /// session's conversation found by `key` (or a new one) is stored.
    Session { key: String, history: Vec<Message> },
    /// After turn `after` of a stored conversation (a response's `previous_response_id`):
    /// the turn's context is that turn's chain of ancestors. It goes on in the same
    /// conversation when `after` is its last turn and no turn runs there; otherwise it
    /// starts a branch — a new conversation holding the history up to `after`. `named`
    /// is how the client named it, for "does not exist".
    After {
        conversation: String,
        after: String,
        named: String,
    },
}

/// The provider and model a request names. Each `None`: the conversation's last model
/// when it goes on, else the server's default. The turn service resolves it once, where
/// it reads the conversation.
#[derive(Clone, Debug, Default)]
pub(crate) struct ModelAsk {
    pub provider: Option<String>,
    pub model: Option<String>,
}

impl ModelAsk {
    /// The model a request names, on the server's default provider.
    pub(crate) fn model(model: Option<String>) -> Self {
        ModelAsk {
            provider: None,
            model,
        }
    }
}

/// Tools a request brings beside those of the model it resolves to.
#[derive(Default)]
pub(crate) struct ToolAsk {
    /// MCP servers the request names (`mcp`), when the operator allows them.
    pub mcp: Vec<RequestMcp>,
    /// Sub-agents the request declares (`agents`), checked as buddy.toml's are.
    pub agents: Vec<serde_json::Value>,
    /// The client's own tools: offered to the model, run by the client.
    pub client: Vec<ToolSpec>,
}

/// Turns the resolved provider into the one the turn calls (the Messages API's
/// pass-through wraps it).
pub(crate) type ProviderWrap =
    Box<dyn FnOnce(Arc<dyn Provider>) -> Arc<dyn Provider> + Send + Sync>;

/// Whose settings (system prompt, policy) a turn runs with besides the request's.
#[derive(Default)]
pub(crate) enum Settings {
    /// Only the request's own (the OpenAI and Anthropic families).
    #[default]
    RequestOnly,
    /// The conversation's kept settings under the request's policy, or `new` ones
    /// (checked), kept with the conversation for this and later turns (buddy's API).
    Kept(Option<Box<ConversationSettings>>),
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
    /// The provider and model the request names, resolved by the turn service.
    pub model: ModelAsk,
    /// Tools the request adds to the resolved model's.
    pub tools: ToolAsk,
    /// Applied to the resolved provider before the turn calls it.
    pub wrap_provider: Option<ProviderWrap>,
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
    /// The conversation's settings the turn runs with (and new ones to keep).
    pub settings: Settings,
    /// The client's prompt-cache key (`prompt_cache_key`), sent with every model call of
    /// the turn; `None`: one buddy derives from the conversation.
    pub cache_key: Option<String>,
}

impl TurnSpec {
    /// A turn of `conversation` on the `model` asked for, under the request's `policy`;
    /// the rest as a plain native turn has it.
    pub(crate) fn new(conversation: Conversation, model: ModelAsk, policy: PolicyPatch) -> Self {
        TurnSpec {
            conversation,
            user_message: None,
            model,
            tools: ToolAsk::default(),
            wrap_provider: None,
            policy,
            append: Vec::new(),
            instructions: None,
            resume: None,
            family: Family::Native,
            keep_messages: false,
            sampling: Sampling::default(),
            settings: Settings::RequestOnly,
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
