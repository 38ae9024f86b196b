//! The store by subject: one trait per subject (conversations, their messages, turns,
//! forks, the spend ledger, call tasks), and [`Store`], all of them in one handle.

mod conversations;
mod forks;
mod history;
mod spend;
mod tasks;
mod turns;

pub use conversations::Conversations;
pub use forks::Forks;
pub use history::History;
pub use spend::Spend;
pub use tasks::Tasks;
pub use turns::Turns;

/// Where conversations are kept: every subject's trait in one handle (an
/// `Arc<dyn Store>`, whose methods need no import). A type that implements them all is
/// a `Store`; a concrete store's methods are called with the subjects' traits in scope
/// (`use buddy_store::prelude::*`).
pub trait Store: Conversations + History + Turns + Forks + Spend + Tasks {}

impl<T: Conversations + History + Turns + Forks + Spend + Tasks + ?Sized> Store for T {}

/// The subjects' traits, unnamed: `use buddy_store::prelude::*` lets a holder of a
/// concrete store (`SqliteStore`, `PgStore`) call all of its methods
/// without naming (or clashing with) each trait.
pub mod prelude {
    pub use super::{
        Conversations as _, Forks as _, History as _, Spend as _, Tasks as _, Turns as _,
    };
}
