//! buddy-store: where conversations live. A [`Store`] — one trait per subject
//! ([`Conversations`], [`History`], [`Turns`], [`Forks`], [`Spend`], [`Tasks`]) in one
//! handle; [`SqliteStore`], the embedded default (one file, created on first use, its
//! migrations embedded); [`PgStore`], for several instances that share one PostgreSQL and
//! behave as one server; and [`open`], which opens either from where it lives (a file or a
//! URL). A concrete store's methods are in scope with `use buddy_store::prelude::*`.

mod body;
mod columns;
mod coordinate;
mod deletion;
mod error;
mod open;
mod postgres;
mod records;
mod relay;
mod sqlite;
mod store;

pub use columns::{UNREADABLE_TITLE, new_id};
pub use coordinate::{
    Claim, ClaimError, Coordinator, LocalCoordinator, StoredEvent, StoredEvents, open_then_claim,
};
pub use deletion::TurnDeletion;
pub use error::StoreError;
pub use open::{OpenError, OpenedStore, StoreLocation, open};
pub use postgres::PgStore;
pub use records::{
    ConversationDetail, ConversationInfo, ConversationSummary, CountedHistory, ForkCopy,
    ResponseOrigin, SpendHold, TurnClosing, TurnEnd, TurnOpening, TurnRecord,
};
pub use relay::{AnswerVerdict, PostedAnswer, Waiting};
pub use sqlite::SqliteStore;
pub use store::{Conversations, Forks, History, Spend, Store, Tasks, Turns, prelude};
