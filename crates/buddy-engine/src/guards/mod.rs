//! The loop guards' building blocks: what counts as "the same call", how alike two
//! texts are, what in a result is noise, a result's fingerprint and tokens in one read,
//! what the turn has run so far, results that differ only in their numbers, and the
//! escalation ladder.

pub mod call_log;
pub mod canonical;
pub mod chant;
pub mod digest;
pub mod ladder;
pub mod noise;
pub mod shape;
pub mod similarity;
pub mod tokens;
