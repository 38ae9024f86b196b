//! The judge of a turn: pure functions from what happened (the replies, the calls with
//! their canonical arguments and results, the policy) to typed verdicts — run or answer a
//! call, a note for the model, a skill withdrawn, Finalize with a cause and evidence.
//! The judge does no I/O and emits nothing; its memory is plain data, private to it. The
//! driver (`machine/`) performs the steps, asks the judge only through [`Judge`] (its
//! state in `memory.rs`, its door in `facade.rs`: a method per step) and turns its
//! verdicts into events.
//!
//! - `route`: where a reply sends the turn;
//! - `limits`: the limits checked before a model call, and what it may offer;
//! - `round`, `gates`, `results` and `signals`: the checks of one tool round (the gates a
//!   call passes, in order), the loop signals its results give, and the escalation ladder
//!   they feed;
//! - `answer`: checks on the text that ends a turn.

mod answer;
mod facade;
mod gates;
mod limits;
mod memory;
mod results;
mod round;
mod route;
mod signal;
mod signals;
mod token_set;
mod verdict;

pub(crate) use answer::{FinalCheck, Screened};
pub(crate) use limits::{Offer, tree_cause};
pub(crate) use memory::Judge;
pub(crate) use memory::Resent;
pub(crate) use round::{Plan, RoundFacts, RoundJudge, Slot};
pub(crate) use route::{FINISH_TOOL, ReplyFacts, RouteVerdict};
pub(crate) use verdict::{FinalizeCause, Trip};

#[cfg(test)]
mod tests;
