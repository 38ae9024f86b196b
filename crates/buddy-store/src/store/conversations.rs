//! Conversations as records: made, listed, read whole, named, given settings, deleted.

use buddy_core::BoxFuture;

use crate::error::StoreError;
use crate::records::{ConversationDetail, ConversationInfo, ConversationSummary};

/// Conversations as records: who owns each, its title and settings, and each read whole.
pub trait Conversations: Send + Sync {
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
    /// The newest conversation of `owner` kept for the client session `session` (its
    /// settings' `metadata.buddy_session`), or `None`.
    fn session_conversation<'a>(
        &'a self,
        owner: &'a str,
        session: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>>;
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
}
