//! Streaks of identical calls in a recorded turn: the loops `buddy judge` checks the
//! judge against (stopped by the 5th, termination v4's measure; ended by the 8th when
//! nothing new came, termination v5's).

use serde::{Deserialize, Serialize};

use crate::guards::noise::fingerprint;
use crate::guards::shape::near_repeat;
use crate::guards::similarity::arg_strings;

/// Identical calls in a row (same tool, same canonical arguments) that make a run a loop
/// the judge must stop by the last of them.
pub const LOOP_REPEATS: u32 = 5;

/// Identical calls in a row whose results brought nothing new (the same, or differing
/// only in their numbers) that the judge must have ended by the last of them, however
/// it warned before (termination v5: warn, then end).
pub const LONG_LOOP_REPEATS: u32 = 8;

/// The longest run of identical calls in a row within one turn.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repeats {
    /// How many calls in a row.
    pub calls: u32,
    /// The tool.
    pub tool: String,
    /// Whether every one of them got the same result (less noise and echo, as the judge
    /// reads results).
    pub same_result: bool,
    /// Model calls of the whole run made by the reply that made the
    /// [`LOOP_REPEATS`]th of them (when there were that many).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fifth_at_model_call: Option<u32>,
    /// The first [`LOOP_REPEATS`] of them came in one reply: buddy runs a call a parallel
    /// batch names twice once, and gives the others its result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_one_reply: bool,
    /// Whether each result brought nothing new: the same as an earlier one of the streak
    /// (less noise and echo), or one differing from the one before only in its numbers.
    #[serde(default)]
    pub nothing_new: bool,
    /// Model calls of the whole run made by the reply that made the
    /// [`LONG_LOOP_REPEATS`]th of them (when there were that many).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eighth_at_model_call: Option<u32>,
    /// The first [`LONG_LOOP_REPEATS`] of them came in one reply.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub eighth_in_one_reply: bool,
}
/// The turn's longest streak of identical calls in a row.
pub(super) fn repeats_of(calls: &[LoggedCall<'_>], before: u32) -> Repeats {
    let mut best = Repeats::default();
    let mut start = 0;
    for i in 0..=calls.len() {
        if i < calls.len() && calls[i].action == calls[start].action {
            continue;
        }
        let len = (i - start) as u32;
        if len > best.calls && len > 1 {
            // The same result as the judge reads results: less its noise and its echo.
            let results: Vec<Option<u64>> = calls[start..i]
                .iter()
                .map(|c| {
                    c.result
                        .map(|r| fingerprint(r, &arg_strings(&c.call.arguments)))
                })
                .collect();
            let fifth = calls.get(start + LOOP_REPEATS as usize - 1);
            let eighth = calls.get(start + LONG_LOOP_REPEATS as usize - 1);
            let nothing_new = (1..results.len()).all(|k| {
                results[..k].contains(&results[k])
                    || matches!(
                        (calls[start + k - 1].result, calls[start + k].result),
                        (Some(a), Some(b)) if near_repeat(a, b)
                    )
            });
            best = Repeats {
                calls: len,
                tool: calls[start].action.0.to_owned(),
                same_result: results.windows(2).all(|w| w[0] == w[1]),
                fifth_at_model_call: (len >= LOOP_REPEATS)
                    .then(|| fifth.map(|c| before + c.reply))
                    .flatten(),
                in_one_reply: len >= LOOP_REPEATS
                    && fifth.is_some_and(|c| c.reply == calls[start].reply),
                nothing_new,
                eighth_at_model_call: (len >= LONG_LOOP_REPEATS)
                    .then(|| eighth.map(|c| before + c.reply))
                    .flatten(),
                eighth_in_one_reply: len >= LONG_LOOP_REPEATS
                    && eighth.is_some_and(|c| c.reply == calls[start].reply),
            };
        }
        start = i;
    }
    best
}

/// One call of a recorded turn.
pub(super) struct LoggedCall<'a> {
    /// The reply (from 1, within the turn) that made it.
    pub(super) reply: u32,
    pub(super) call: &'a buddy_core::ToolCall,
    /// Its result, when the log holds one.
    pub(super) result: Option<&'a str>,
    /// Its action: the tool and its canonical arguments.
    pub(super) action: (&'a str, String),
}
