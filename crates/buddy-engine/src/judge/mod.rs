//! The judge of a turn: pure functions from what happened (the replies, the calls with
//! their canonical arguments and results, the policy) to typed verdicts — run or answer a
//! call, a note for the model, a skill withdrawn, Finalize with a cause and evidence.
//! The judge does no I/O and emits nothing; its memory is plain data. The driver
//! (`machine/`) performs the steps and turns verdicts into events.
//!
//! - `route`: where a reply sends the turn;
//! - `limits`: the limits checked before a model call, and what it may offer;
//! - `round` and `signals`: the checks of one tool round, and the loop signals and
//!   escalation ladder its results feed;
//! - `answer`: checks on the text that ends a turn.

pub(crate) mod answer;
pub(crate) mod limits;
pub(crate) mod memory;
pub(crate) mod round;
pub(crate) mod route;
mod signals;
pub(crate) mod verdict;

#[cfg(test)]
mod tests;
