//! Where a turn's conversation stands before its opening is written: what `open` and a
//! client session's placing (`session`) decide, and the opening's write reads.

use buddy_core::Message;
use buddy_store::CountedHistory;

use crate::state::TurnLease;

/// Where a turn's conversation stands before its opening is written.
pub(super) enum Place {
    /// The client holds it (an OpenAI endpoint); the turn is claimed.
    Ephemeral(TurnLease),
    /// Stored already, with this id; the turn is claimed.
    Existing(String, TurnLease),
    /// Made by the turn's opening, then claimed.
    New,
    /// A client session's new conversation, made by the turn's opening with the
    /// request's whole history and kept under the session's key, then claimed.
    NewSession(String),
    /// A branch of a response tree: a new conversation made by the turn's opening with
    /// the history copied in, each message with the turn that first added it (these).
    Branch(Vec<String>),
}

/// Where a turn goes, the history it starts from, and the client's messages its opening
/// appends (a client session's, which the stored conversation does not have yet).
pub(super) struct Placed {
    pub place: Place,
    /// The history the turn starts from, before `new_messages`.
    pub history: CountedHistory,
    pub new_messages: Vec<Message>,
}

impl Placed {
    /// A turn placed with its history as the store (or the request) has it.
    pub(super) fn kept((place, history): (Place, CountedHistory)) -> Self {
        Placed {
            place,
            history,
            new_messages: Vec::new(),
        }
    }
}
