//! buddy-store: where conversations live. A [`Store`] trait; [`SqliteStore`], the
//! embedded default (one file, created on first use, its migrations embedded);
//! [`PgStore`], for several instances that share one PostgreSQL and behave as one server;
//! and [`open`], which opens either from where it lives (a file or a URL).

mod body;
mod coordinate;
mod deletion;
mod ledger;
mod open;
mod postgres;
mod sqlite;
mod store;

pub use coordinate::{
    Claim, ClaimError, Coordinator, LocalCoordinator, StoredEvent, StoredEvents, open_then_claim,
};
pub use deletion::TurnDeletion;
pub use open::{OpenError, OpenedStore, StoreLocation, open};
pub use postgres::PgStore;
pub use sqlite::SqliteStore;
pub use store::{
    ConversationDetail, ConversationInfo, ConversationSummary, CountedHistory, ForkCopy, SpendHold,
    Store, StoreError, TurnClosing, TurnEnd, TurnOpening, TurnRecord, UNREADABLE_TITLE, new_id,
};
