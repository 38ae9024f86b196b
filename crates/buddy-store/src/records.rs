//! The store's records: what a conversation, a turn and a history read back as, and
//! what a turn's opening and closing, a fork and a spend hold write.

use buddy_core::{Message, StopReason, TokenCount, TurnStats, Usd};
use serde::{Deserialize, Serialize};

/// One conversation in a listing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConversationSummary {
    pub id: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub messages: u64,
    /// The first user message, shortened.
    pub title: String,
    pub last_stop_reason: Option<TurnEnd>,
    /// The conversation this one is a fork of (`Forks::fork_conversation`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    /// The index (in `forked_from`'s messages) of the first message the fork left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_before: Option<u64>,
}

/// One turn of a conversation: when it ran, with which model, and how it ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub id: String,
    pub model: String,
    pub started_at_ms: i64,
    pub finished_at_ms: Option<i64>,
    /// The stop reason; `interrupted` for a turn the server never finished (a crash).
    pub stop_reason: Option<TurnEnd>,
    pub stats: Option<TurnStats>,
    pub error: Option<String>,
    /// Deleted while later turns build on its messages: gone from every read that names
    /// it (see `Turns::delete_turn`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
    /// What the Responses API request that made it said of it (see [`ResponseOrigin`]);
    /// `None` for a turn of another API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ResponseOrigin>,
}

/// What a Responses API request said of the turn it made, read back with the response:
/// the response it continued (`previous_response_id`) and whether it ran in the
/// background.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseOrigin {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
}

/// How a stored turn ended: one of the engine's stop reasons, or `interrupted` — the
/// process running it went away before it reached one. Stored and shown as its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnEnd {
    Stopped(StopReason),
    Interrupted,
}

impl TurnEnd {
    /// Its stored (and shown) name.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnEnd::Stopped(reason) => reason.as_str(),
            TurnEnd::Interrupted => "interrupted",
        }
    }

    /// The end named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "interrupted" => Some(TurnEnd::Interrupted),
            other => StopReason::from_name(other).map(TurnEnd::Stopped),
        }
    }

    /// The stop reason, unless the turn was interrupted.
    pub fn stop_reason(self) -> Option<StopReason> {
        match self {
            TurnEnd::Stopped(reason) => Some(reason),
            TurnEnd::Interrupted => None,
        }
    }
}

impl Serialize for TurnEnd {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TurnEnd {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        TurnEnd::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("`{name}` is no way a turn ends")))
    }
}

/// A whole conversation: every message (tool calls and results included) and every turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConversationDetail {
    pub id: String,
    pub created_at_ms: i64,
    /// The title a person gave it, or its first user message, shortened.
    #[serde(default)]
    pub title: String,
    pub messages: Vec<Message>,
    /// The turn each message was added by, in the order of `messages`.
    #[serde(default)]
    pub message_turns: Vec<String>,
    /// Each message's number in the conversation (never reused, so an id made of it
    /// names the same message after others are removed), in the order of `messages`.
    #[serde(default, skip_serializing)]
    pub message_seqs: Vec<i64>,
    /// When each message was made (ms since the epoch), in the order of `messages`: a
    /// turn's call message when the model made the calls, each result when it came in
    /// (kept as made, though written with the next reply), so the two bound the tool's
    /// time.
    #[serde(default)]
    pub message_times_ms: Vec<i64>,
    pub turns: Vec<TurnRecord>,
    /// What the conversation's owner set for all its turns (a JSON object; see
    /// `Conversations::set_settings`); empty when nothing was set.
    #[serde(default = "empty_object")]
    pub settings: serde_json::Value,
    /// The conversation this one is a fork of (`Forks::fork_conversation`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    /// The index (in `forked_from`'s messages) of the first message the fork left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_before: Option<u64>,
}

impl ConversationDetail {
    /// Turn `id`'s record, unless it is unknown here or hidden (a deleted response).
    pub fn live_turn(&self, id: &str) -> Option<&TurnRecord> {
        self.turns.iter().find(|t| t.id == id && !t.hidden)
    }

    /// How many of the messages come up to the end of turn `id`'s own: the history a
    /// response of that turn was made from, and answered (0 when it has none).
    pub fn through_turn(&self, id: &str) -> usize {
        self.message_turns
            .iter()
            .rposition(|t| t == id)
            .map_or(0, |i| i + 1)
    }
}

/// `{}`: the settings of a conversation nobody set any for.
pub(crate) fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

/// Who a conversation belongs to and how it was last run.
#[derive(Clone, Debug, PartialEq)]
pub struct ConversationInfo {
    /// The owner's identity: a hash of the API key that created it, never the key.
    pub owner: String,
    /// The model of its latest turn, so a continued conversation keeps it.
    pub last_model: Option<String>,
    /// Its settings (a JSON object, `{}` when none were set), applied to each of its turns.
    pub settings: serde_json::Value,
}

/// A conversation's messages and, beside each, the token count kept with it (`None`
/// for a message stored without one, or before counts were kept).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CountedHistory {
    pub messages: Vec<Message>,
    pub counts: Vec<Option<TokenCount>>,
    /// When each message was made (ms since the epoch), for messages written after they
    /// were made (`History::append_history`, a closing): a store keeps it as the message's
    /// time, so a round's results written with the next reply keep the time they came
    /// in. A message without one takes the time of the write. Empty when read back.
    pub times_ms: Vec<i64>,
}

/// What a stored turn writes before its engine starts, as one atomic write: the
/// conversation (created for `owner` when `conversation` is `None`), settings the request
/// gave, the turn's record, and the messages that open it (a new conversation's system
/// prompt, the request's own, the user's message). All of it is kept, or none.
#[derive(Clone, Copy, Debug)]
pub struct TurnOpening<'a> {
    pub conversation: Option<&'a str>,
    pub owner: &'a str,
    pub turn: &'a str,
    pub model: &'a str,
    pub settings: Option<&'a serde_json::Value>,
    pub messages: &'a [Message],
    /// Token counts of `messages`, as in `History::append_counted`.
    pub counts: &'a [Option<TokenCount>],
    /// Messages copied from another conversation before `messages`, each kept with the
    /// turn that first added it (`copied_turns`, as long): a branch of a response tree
    /// starts a new conversation with its ancestors' history.
    pub copied: &'a [Message],
    pub copied_turns: &'a [String],
}

/// A fork of a conversation (see `Forks::fork_conversation`): a new conversation of
/// `owner` with the messages of `from` before index `before`, its title and settings.
#[derive(Clone, Copy, Debug)]
pub struct ForkCopy<'a> {
    pub from: &'a str,
    pub owner: &'a str,
    /// The index of the first message of `from` left out; recorded as the fork's
    /// `fork_before`.
    pub before: usize,
    /// Turns whose messages are all copied: (the original's id, the copy's), each copied
    /// with its record (times, end, stats, tape) under the copy's id, its messages
    /// renamed to it. Other copied messages keep the original's turn id, without record.
    pub turns: &'a [(String, String)],
}

/// How a turn ended, with the messages it still had to append (its answer, a round the
/// end cut short): what a stored turn writes last.
#[derive(Clone, Copy, Debug)]
pub struct TurnClosing<'a> {
    pub conversation: &'a str,
    pub turn: &'a str,
    /// Appended before the end is recorded; `counts` as in `History::append_counted`,
    /// `times_ms` as in `History::append_history`.
    pub last: &'a CountedHistory,
    pub reason: StopReason,
    pub stats: &'a TurnStats,
    pub error: Option<&'a str>,
    /// What replay plays back, when the turn has one.
    pub tape: Option<&'a str>,
}

/// A turn's hold on its key's spend room (see `Spend::hold_spend`).
#[derive(Clone, Copy, Debug)]
pub struct SpendHold<'a> {
    /// The key's identity.
    pub owner: &'a str,
    /// The hold's id, given again to settle it.
    pub id: &'a str,
    /// What the turn may spend at most (its money budget); `None`: all the room left.
    pub wanted: Option<Usd>,
    /// Each ceiling as (first day it counts from, `YYYY-MM-DD`; its limit): what was spent
    /// since that day and what other live holds hold stay under the limit.
    pub ceilings: &'a [(String, Usd)],
    /// Now, in ms since the epoch: holds that expired before it hold nothing.
    pub now_ms: i64,
    /// When this hold lapses unless settled first (its process died mid-turn).
    pub expires_at_ms: i64,
}
