//! The store trait and its records.

use buddy_core::{BoxFuture, Message, RecordedTask, StopReason, TokenCount, TurnStats, Usd};
use serde::{Deserialize, Serialize};

/// A store operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("conversation store: {0}")]
    Backend(String),
    #[error("conversation `{0}` does not exist")]
    NotFound(String),
    #[error(
        "conversation store: a stored record is unreadable ({0}); the database may have been edited by hand"
    )]
    Corrupt(String),
}

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
    /// The conversation this one is a fork of ([`Store::fork_conversation`]), if any.
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
    /// it (see [`Store::delete_turn`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
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

/// A stored turn end, read back; text that names none is reported as corrupt.
pub(crate) fn turn_end(text: Option<String>) -> Result<Option<TurnEnd>, StoreError> {
    text.map(|name| {
        TurnEnd::from_name(&name).ok_or_else(|| {
            StoreError::Corrupt(format!("a turn ended `{name}`, which is no stop reason"))
        })
    })
    .transpose()
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
    /// [`Store::set_settings`]); empty when nothing was set.
    #[serde(default = "empty_object")]
    pub settings: serde_json::Value,
    /// The conversation this one is a fork of ([`Store::fork_conversation`]), if any.
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
fn empty_object() -> serde_json::Value {
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
    /// were made ([`Store::append_history`], a closing): a store keeps it as the message's
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
    /// Token counts of `messages`, as in [`Store::append_counted`].
    pub counts: &'a [Option<TokenCount>],
    /// Messages copied from another conversation before `messages`, each kept with the
    /// turn that first added it (`copied_turns`, as long): a branch of a response tree
    /// starts a new conversation with its ancestors' history.
    pub copied: &'a [Message],
    pub copied_turns: &'a [String],
}

/// `messages` in runs of consecutive messages of one turn (`turns`, as long): each run
/// is one append.
pub(crate) fn runs<'a>(
    messages: &'a [Message],
    turns: &'a [String],
) -> impl Iterator<Item = (&'a str, &'a [Message])> + 'a {
    let mut start = 0;
    std::iter::from_fn(move || {
        let turn = turns.get(start)?;
        let end = (start..messages.len().min(turns.len()))
            .find(|&i| &turns[i] != turn)
            .unwrap_or(messages.len().min(turns.len()));
        let run = (turn.as_str(), &messages[start..end]);
        start = end;
        Some(run)
    })
}

/// A fork of a conversation (see [`Store::fork_conversation`]): a new conversation of
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
    /// Appended before the end is recorded; `counts` as in [`Store::append_counted`],
    /// `times_ms` as in [`Store::append_history`].
    pub last: &'a CountedHistory,
    pub reason: StopReason,
    pub stats: &'a TurnStats,
    pub error: Option<&'a str>,
    /// What replay plays back, when the turn has one.
    pub tape: Option<&'a str>,
}

/// Where conversations are kept. Messages are appended as the turn produces them, a
/// round at a time, so a crash or a failed write never leaves half a round behind.
pub trait Store: Send + Sync {
    /// Creates an empty conversation owned by `owner` and returns its id.
    fn create_conversation<'a>(
        &'a self,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<String, StoreError>>;
    /// The owner and latest model of a conversation, or `None` when it does not exist.
    fn conversation_info<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConversationInfo>, StoreError>>;
    /// Every message of a conversation, in order, with the token counts kept with them.
    fn load_counted<'a>(&'a self, id: &'a str)
    -> BoxFuture<'a, Result<CountedHistory, StoreError>>;
    /// Every message of a conversation, in order.
    fn load_messages<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Vec<Message>, StoreError>> {
        Box::pin(async move { self.load_counted(id).await.map(|h| h.messages) })
    }
    /// Appends messages to a conversation in one transaction: all are kept or none.
    /// `counts[i]`, when there, is message `i`'s token count (kept so that the next turn
    /// need not count it again).
    fn append_counted<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        messages: &'a [Message],
        counts: &'a [Option<TokenCount>],
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Appends `history`'s messages with their counts and the times they were made (see
    /// [`CountedHistory::times_ms`]), in one transaction: all are kept or none. This
    /// default gives them the time of the write; the stores here keep their own.
    fn append_history<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        history: &'a CountedHistory,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.append_counted(id, turn_id, &history.messages, &history.counts)
    }
    /// Appends messages, uncounted, in one transaction: all are kept or none.
    fn append_messages<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        messages: &'a [Message],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.append_counted(id, turn_id, messages, &[])
    }
    /// Appends one message; returns once it is durable.
    fn append_message<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        message: &'a Message,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.append_messages(id, turn_id, std::slice::from_ref(message))
    }
    /// Writes a turn's opening (see [`TurnOpening`]) and returns its conversation's id;
    /// `NotFound` when the conversation named does not exist. A store that can does it
    /// in one transaction; this default writes step by step, deletes a conversation it
    /// created if a later step fails, and closes a turn it began on an existing one with
    /// `store_error`.
    fn open_turn<'a>(
        &'a self,
        opening: TurnOpening<'a>,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(async move {
            let id = match opening.conversation {
                Some(id) if self.conversation_info(id).await?.is_none() => {
                    return Err(StoreError::NotFound(id.to_owned()));
                }
                Some(id) => id.to_owned(),
                None => self.create_conversation(opening.owner).await?,
            };
            let mut begun = false;
            let written = async {
                if let Some(settings) = opening.settings
                    && !self.set_settings(&id, settings).await?
                {
                    return Err(StoreError::NotFound(id.clone()));
                }
                self.begin_turn(&id, opening.turn, opening.model).await?;
                begun = true;
                for (turn, run) in runs(opening.copied, opening.copied_turns) {
                    self.append_messages(&id, turn, run).await?;
                }
                if !opening.messages.is_empty() {
                    self.append_counted(&id, opening.turn, opening.messages, opening.counts)
                        .await?;
                }
                Ok(())
            }
            .await;
            if let Err(e) = written {
                if opening.conversation.is_none() {
                    let _ = self.delete_conversation(&id).await;
                } else if begun {
                    let message = e.to_string();
                    let _ = self
                        .finish_turn(
                            opening.turn,
                            StopReason::StoreError,
                            &TurnStats::default(),
                            Some(&message),
                            None,
                        )
                        .await;
                }
                return Err(e);
            }
            Ok(id)
        })
    }
    /// Records that a turn started.
    fn begin_turn<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        model: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Records how a turn ended, and its tape (what replay plays back), when it has one.
    fn finish_turn<'a>(
        &'a self,
        turn_id: &'a str,
        reason: StopReason,
        stats: &'a TurnStats,
        error: Option<&'a str>,
        tape: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Appends a turn's last messages and records how it ended. If the append fails,
    /// the end is not recorded. A store that can does both in one transaction. A store
    /// that keeps turn claims ([`Store::claims_of`]) ends the turn's claim in the same
    /// write, whatever else it finds.
    fn close_turn<'a>(&'a self, closing: TurnClosing<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if !closing.last.messages.is_empty() {
                self.append_history(closing.conversation, closing.turn, closing.last)
                    .await?;
            }
            self.finish_turn(
                closing.turn,
                closing.reason,
                closing.stats,
                closing.error,
                closing.tape,
            )
            .await
        })
    }
    /// The instance whose turn claims this store keeps (PostgreSQL, the coordinator of
    /// the instances sharing it), `None` for a store that keeps none: when it is the
    /// server's own coordinator's ([`crate::Coordinator::instance`]), closing a turn has
    /// ended its claim and the server does not release it with a write of its own.
    fn claims_of(&self) -> Option<&str> {
        None
    }
    /// The tapes a conversation's turns kept, as (turn id, tape JSON), oldest turn first.
    fn turn_tapes<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>>;
    /// Conversations of `owner` (all of them for `None`), newest first.
    fn list_conversations<'a>(
        &'a self,
        owner: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<ConversationSummary>, StoreError>>;
    /// One conversation, or `None`.
    fn get_conversation<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConversationDetail>, StoreError>>;
    /// Gives a conversation a title of a person's choosing; `false` if it does not exist.
    fn rename_conversation<'a>(
        &'a self,
        id: &'a str,
        title: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// Replaces a conversation's settings (a JSON object the server checked: system
    /// prompt, policy) kept for all its turns; `false` if it does not exist.
    fn set_settings<'a>(
        &'a self,
        id: &'a str,
        settings: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// Deletes a conversation; `false` if it did not exist.
    fn delete_conversation<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Writes a fork (see [`ForkCopy`]) and returns its id; `NotFound` when `from` does
    /// not exist. The stores here do it in one transaction, keeping each copied message's
    /// time and count and recording where the fork came from (`forked_from`,
    /// `fork_before`); this default copies the messages only, step by step, with their
    /// original turn ids and no records.
    fn fork_conversation<'a>(
        &'a self,
        fork: ForkCopy<'a>,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        Box::pin(async move {
            let detail = self
                .get_conversation(fork.from)
                .await?
                .ok_or_else(|| StoreError::NotFound(fork.from.to_owned()))?;
            let before = fork.before.min(detail.messages.len());
            let id = self.create_conversation(fork.owner).await?;
            let written = async {
                if detail.settings.as_object().is_some_and(|s| !s.is_empty()) {
                    self.set_settings(&id, &detail.settings).await?;
                }
                let turns = &detail.message_turns[..before.min(detail.message_turns.len())];
                for (turn, run) in runs(&detail.messages[..before], turns) {
                    self.append_messages(&id, turn, run).await?;
                }
                Ok(())
            }
            .await;
            if let Err(e) = written {
                let _ = self.delete_conversation(&id).await;
                return Err(e);
            }
            Ok(id)
        })
    }

    /// Removes the messages numbered `seqs` (see [`ConversationDetail::message_seqs`]) of
    /// `conversation`, in one write; how many there were.
    fn remove_messages<'a>(
        &'a self,
        conversation: &'a str,
        seqs: &'a [i64],
    ) -> BoxFuture<'a, Result<usize, StoreError>>;

    /// Deletes turn `turn` of conversation `conversation` and only it: the last live turn
    /// goes with its messages (and the conversation, when it was the only one); a turn
    /// later turns build on is hidden, its messages kept as their context.
    fn delete_turn<'a>(
        &'a self,
        conversation: &'a str,
        turn: &'a str,
    ) -> BoxFuture<'a, Result<crate::TurnDeletion, StoreError>>;
    /// Adds `amount` to what `owner` spent on `day` (a UTC date, `YYYY-MM-DD`): the
    /// ledger the server's per-key spend ceilings read. It outlives conversations.
    fn add_spend<'a>(
        &'a self,
        owner: &'a str,
        day: &'a str,
        amount: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// What `owner` spent from `first_day` (inclusive, `YYYY-MM-DD`) on.
    fn spend_since<'a>(
        &'a self,
        owner: &'a str,
        first_day: &'a str,
    ) -> BoxFuture<'a, Result<Usd, StoreError>>;
    /// Holds part of `hold.owner`'s room under its ceilings for a turn about to start, so
    /// that turns running at once cannot together pass a ceiling: what is held counts as
    /// spent until [`Store::settle_spend`] (or `expires_at_ms`, if its process died).
    /// Returns what it holds: `wanted` or the room left, the smaller; zero holds nothing.
    /// A store that can checks and holds atomically; this default only reads the room.
    fn hold_spend<'a>(&'a self, hold: SpendHold<'a>) -> BoxFuture<'a, Result<Usd, StoreError>> {
        Box::pin(async move {
            let mut room = hold.wanted;
            for (first_day, limit) in hold.ceilings {
                let spent = self.spend_since(hold.owner, first_day).await?;
                let left = Usd::from_nanos(limit.nanos().saturating_sub(spent.nanos()));
                room = Some(room.map_or(left, |r| r.min(left)));
            }
            Ok(room.unwrap_or(Usd::ZERO))
        })
    }
    /// Ends hold `id` of `owner` and adds what its turn cost to `day`'s spend.
    fn settle_spend<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        day: &'a str,
        cost: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = id;
        Box::pin(async move {
            match cost == Usd::ZERO {
                true => Ok(()),
                false => self.add_spend(owner, day, cost).await,
            }
        })
    }
    /// Records that call `call_id` of conversation `id` became `task` on its server, so
    /// a turn after a restart can wait on it again ([`Store::call_tasks`]).
    fn record_call_task<'a>(
        &'a self,
        id: &'a str,
        call_id: &'a str,
        task: &'a RecordedTask,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The tasks recorded for calls of conversation `id`, by call id.
    fn call_tasks<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<std::collections::HashMap<String, RecordedTask>, StoreError>>;
    /// Bytes of message JSON `owner`'s conversations hold (for a per-key storage quota).
    /// This default reads every conversation; the stores sum it in one query.
    fn stored_bytes<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let mut bytes = 0u64;
            for summary in self.list_conversations(Some(owner)).await? {
                for message in self.load_messages(&summary.id).await? {
                    let json = serde_json::to_string(&message)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                    bytes = bytes.saturating_add(json.len() as u64);
                }
            }
            Ok(bytes)
        })
    }
}

/// A turn's hold on its key's spend room (see [`Store::hold_spend`]).
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

/// The room under `ceilings` given what was spent in each and what live holds hold,
/// capped at `wanted`: what a new hold holds.
pub(crate) fn room_to_hold(wanted: Option<Usd>, ceilings: &[(Usd, u64)], held: u64) -> u64 {
    let mut room = wanted.map_or(u64::MAX, Usd::nanos);
    for (limit, spent) in ceilings {
        room = room.min(limit.nanos().saturating_sub(spent.saturating_add(held)));
    }
    room
}

/// A new random id with a prefix (`conv_…`, `turn_…`): 128 bits, hex.
pub fn new_id(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: fall back to time and a counter (unique, not secret).
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        bytes[..8].copy_from_slice(&(nanos as u64).to_le_bytes());
        bytes[8..].copy_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}_{hex}")
}

/// Milliseconds since the Unix epoch.
/// A stored count from its two columns; either missing (or a negative count) is none.
pub(crate) fn stored_count(tokens: Option<i64>, encoding: Option<String>) -> Option<TokenCount> {
    Some(TokenCount {
        tokens: u64::try_from(tokens?).ok()?,
        encoding: encoding?,
    })
}

/// The two columns a message's count is stored in (both null when it has none).
pub(crate) fn count_columns(count: Option<&Option<TokenCount>>) -> (Option<i64>, Option<&str>) {
    match count {
        Some(Some(count)) => (
            i64::try_from(count.tokens).ok(),
            Some(count.encoding.as_str()),
        ),
        _ => (None, None),
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The role column of a stored message.
pub(crate) fn role(message: &Message) -> &'static str {
    match message {
        Message::System { .. } => "system",
        Message::User { .. } => "user",
        Message::Assistant { .. } => "assistant",
        Message::Tool { .. } => "tool",
        Message::Note { .. } => "note",
    }
}

/// A conversation's title from its stored first user message (see [`first_user_title`]).
pub(crate) fn title(first_user: Option<&str>) -> Result<String, StoreError> {
    match first_user {
        Some(body) => Ok(first_user_title(&[decode::<Message>(body)?])),
        None => Ok(String::new()),
    }
}

/// The title a conversation is listed under: its own, else its first user message's; a
/// message that cannot be read marks this conversation rather than failing the list.
pub(crate) fn listed_title(
    named: Option<String>,
    first_user: Result<Option<String>, StoreError>,
) -> String {
    if let Some(named) = named {
        return named;
    }
    match first_user.and_then(|body| title(body.as_deref())) {
        Ok(title) => title,
        Err(_) => UNREADABLE_TITLE.to_owned(),
    }
}

/// The title of a listed conversation whose first message cannot be read.
pub const UNREADABLE_TITLE: &str = "(unreadable: a stored message of this conversation is damaged)";

/// The title of a conversation nobody named: its first user message, shortened.
pub(crate) fn first_user_title(messages: &[Message]) -> String {
    messages
        .iter()
        .find(|m| m.is_user())
        .and_then(Message::text)
        .unwrap_or_default()
        .chars()
        .take(80)
        .collect()
}

/// Stored settings text as JSON: `{}` for none.
pub(crate) fn settings(text: Option<&str>) -> Result<serde_json::Value, StoreError> {
    match text {
        Some(text) => decode(text),
        None => Ok(empty_object()),
    }
}

/// A stored JSON record; one that does not parse is reported as corrupt.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(e.to_string()))
}

#[cfg(test)]
mod turn_ends {
    use super::*;

    #[test]
    fn turn_ends_read_back_by_name_and_other_text_is_corrupt() {
        assert_eq!(
            turn_end(Some("approval_required".into())).ok(),
            Some(Some(TurnEnd::Stopped(StopReason::ApprovalRequired)))
        );
        assert_eq!(
            turn_end(Some("interrupted".into())).ok(),
            Some(Some(TurnEnd::Interrupted))
        );
        assert_eq!(turn_end(None).ok(), Some(None));
        assert!(matches!(
            turn_end(Some("exploded".into())),
            Err(StoreError::Corrupt(_))
        ));
        assert_eq!(
            serde_json::to_string(&TurnEnd::Interrupted).ok().as_deref(),
            Some("\"interrupted\"")
        );
        assert_eq!(TurnEnd::Interrupted.stop_reason(), None);
    }
}
