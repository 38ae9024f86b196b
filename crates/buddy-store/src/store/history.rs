//! A conversation's messages: read in order, appended a round at a time, removed by
//! number, and counted in bytes for a per-key storage quota.

use buddy_core::{BoxFuture, Message, TokenCount};

use super::conversations::Conversations;
use crate::error::StoreError;
use crate::records::CountedHistory;

/// A conversation's messages. They are appended as the turn produces them, a round at a
/// time, so a crash or a failed write never leaves half a round behind.
pub trait History: Conversations {
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
    /// Removes the messages numbered `seqs` (see `ConversationDetail::message_seqs`) of
    /// `conversation`, in one write; how many there were.
    fn remove_messages<'a>(
        &'a self,
        conversation: &'a str,
        seqs: &'a [i64],
    ) -> BoxFuture<'a, Result<usize, StoreError>>;
    /// Bytes of message JSON `owner`'s conversations hold (for a per-key storage quota).
    /// This default reads every conversation; the stores keep a count per key, read in
    /// one row (PostgreSQL counts a running turn's writes when the turn ends).
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
