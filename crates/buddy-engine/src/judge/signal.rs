//! A loop signal about one call, as the checks of `results.rs` and `signals.rs` raise it,
//! and the per-skill counts they keep.

use std::collections::BTreeMap;

use buddy_core::{Evidence, GuardKind};

/// A loop signal about one call.
pub(super) struct Signal {
    pub(super) guard: GuardKind,
    pub(super) skill: String,
    pub(super) key: String,
    pub(super) what: String,
    pub(super) evidence: Vec<Evidence>,
    /// Skills to withdraw together at the Withdraw rung (a cycle's members).
    pub(super) members: Vec<String>,
    /// No doubt is left (the model repeated a call it was already told about, or kept at a
    /// repeat past the warning): straight to Finalize.
    pub(super) certain: bool,
    /// The call was executed (its result stands) rather than answered without running.
    pub(super) ran: bool,
    /// Repeats left before the turn ends, when the warning can say so.
    pub(super) left: Option<u32>,
}

/// Changes the count kept for `name`, allocating its key only the first time.
pub(super) fn bump<V: Default>(
    counts: &mut BTreeMap<String, V>,
    name: &str,
    change: impl FnOnce(&mut V),
) {
    match counts.get_mut(name) {
        Some(count) => change(count),
        None => change(counts.entry(name.to_owned()).or_default()),
    }
}
