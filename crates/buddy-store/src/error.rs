//! What a failed store operation says.

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
