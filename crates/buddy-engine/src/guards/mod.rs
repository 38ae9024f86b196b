//! The loop guards' building blocks: what counts as "the same call", how alike two
//! texts are, what in a result is noise, what the turn has run so far, and the
//! escalation ladder.

pub mod call_log;
pub mod canonical;
pub mod chant;
pub mod ladder;
pub mod noise;
pub mod similarity;
pub mod tokens;
