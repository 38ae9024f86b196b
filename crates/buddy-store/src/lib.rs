//! buddy-store: where conversations live. A [`Store`] trait, ready for more backends,
//! and [`SqliteStore`], the embedded default: one file, created on first use, its
//! migrations embedded.

mod coordinate;
mod sqlite;
mod store;

pub use coordinate::{Claim, ClaimError, Coordinator, LocalCoordinator};
pub use sqlite::SqliteStore;
pub use store::{
    ConversationDetail, ConversationInfo, ConversationSummary, Store, StoreError, TurnRecord,
    new_id,
};
