//! The key's money as each model call sees it: before a call starts it reserves its worst
//! case (the input it sends and the most it may write, at its price) of the room its key
//! has left under a spend ceiling, and after it the reservation is settled to what the
//! call cost. A server gives every turn of a key one ([`crate::CallSlots::with_ledger`]),
//! so turns of a key run side by side and the ceiling is never passed by more than the
//! calls in flight. A call refused its reservation is not made: the turn ends for its
//! cost (`cost_budget`), with an answer.

use buddy_core::{BoxFuture, Price, Usage, Usd};

/// The most a call may cost, before it is made.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CallWorst {
    /// The tokens the request sends, as the engine counts them.
    pub input_tokens: u64,
    /// The most the request lets the model write (`None`: the provider's default).
    pub max_output_tokens: Option<u32>,
    /// The call's price, when the engine knows it.
    pub price: Option<Price>,
}

/// What a call reserved: settled by [`CallLedger::settle`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reserved {
    /// What is held of the key's room while the call runs.
    pub amount: Usd,
    /// The price it was reserved at, to settle at.
    pub price: Option<Price>,
    /// The most the call may write for the reservation to cover it: the request is cut to it.
    pub max_output_tokens: Option<u32>,
}

/// The key's ledger as a turn's calls use it.
pub trait CallLedger: Send + Sync + std::fmt::Debug {
    /// Reserves `worst` of the key's room; `Err` says why the call may not be made.
    fn reserve(&self, worst: CallWorst) -> BoxFuture<'_, Result<Reserved, String>>;
    /// Ends a reservation: the call cost what `usage` says (`None`: it failed, or its
    /// usage is unknown).
    fn settle(&self, reserved: Reserved, usage: Option<Usage>) -> BoxFuture<'_, ()>;
}
