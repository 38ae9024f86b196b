//! Trimming in large steps: a long turn's requests keep the previous request as their
//! prefix (the provider's prompt cache reads it back) and change it only once every
//! several calls, each time down to the low-water mark.

use buddy_core::{Message, ToolCall};
use buddy_engine::check_history;
use buddy_engine::context::{EstimateCounter, LOW_WATER_PERCENT, TokenCounter, fit_stepped};
use proptest::prelude::*;

/// A turn's history after `rounds` tool rounds whose results have the sizes in `sizes`.
fn history(sizes: &[usize], rounds: usize) -> Vec<Message> {
    let mut history = vec![
        Message::system("You are a careful agent."),
        Message::user("please read the files"),
    ];
    for (i, size) in sizes.iter().take(rounds).enumerate() {
        let id = format!("c{i}");
        history.push(Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall::new(&id, "read", format!(r#"{{"n":{i}}}"#))],
        });
        history.push(Message::tool_result(&id, "x".repeat(*size), false));
    }
    history
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn a_growing_turn_is_trimmed_in_few_large_steps(
        sizes in prop::collection::vec(40usize..400, 20..80),
        budget in 2_000usize..8_000,
    ) {
        let counter = EstimateCounter;
        let mut floor = 0;
        let mut previous: Option<Vec<Message>> = None;
        let (mut steps, mut calls) = (0, 0);
        for rounds in 0..=sizes.len() {
            let messages = history(&sizes, rounds);
            let counts: Vec<usize> = messages.iter().map(|m| counter.message(m)).collect();
            let total = counts.iter().sum();
            let Ok((fitted, next)) = fit_stepped(&messages, &counts, total, budget, &counter, floor)
            else {
                prop_assert!(false, "a round of at most 400 bytes always fits {budget} tokens");
                return Ok(());
            };
            calls += 1;
            let sent = fitted.messages.into_owned();
            prop_assert!(fitted.tokens <= budget, "{} > {budget}", fitted.tokens);
            prop_assert!(check_history(&sent).is_ok());
            if next == floor {
                // The trimming stood still: the previous request is this one's prefix.
                if let Some(before) = &previous {
                    prop_assert!(sent.starts_with(before), "the prefix changed without a step");
                }
            } else {
                // A step: down to the low-water mark (plus the newest round, never dropped).
                steps += 1;
                let newest = counts[counts.len() - 2..].iter().sum::<usize>();
                prop_assert!(
                    fitted.tokens <= budget * LOW_WATER_PERCENT / 100 + newest + 64,
                    "a step to {} tokens is not a large one ({budget} budget)", fitted.tokens
                );
            }
            floor = next;
            previous = Some(sent);
        }
        // A round is at most ~115 tokens, a step frees ~a quarter of the budget (≥ 500):
        // one step per four calls at the very most.
        prop_assert!(steps * 4 <= calls, "{steps} steps in {calls} calls");
    }
}

#[test]
fn without_a_floor_a_history_that_fits_is_sent_whole() {
    let counter = EstimateCounter;
    let messages = history(&[100, 100], 2);
    let counts: Vec<usize> = messages.iter().map(|m| counter.message(m)).collect();
    let total = counts.iter().sum();
    let (fitted, floor) = fit_stepped(&messages, &counts, total, 10_000, &counter, 0).unwrap();
    assert_eq!(floor, 0);
    assert_eq!(fitted.messages.len(), messages.len());
    // Too big: the oldest rounds go, and the floor says where the kept part begins.
    let messages = history(&[400; 30], 30);
    let counts: Vec<usize> = messages.iter().map(|m| counter.message(m)).collect();
    let total: usize = counts.iter().sum();
    let (fitted, floor) = fit_stepped(&messages, &counts, total, total / 2, &counter, 0).unwrap();
    assert!(
        floor > 2 && fitted.dropped == floor - 2,
        "{floor} {}",
        fitted.dropped
    );
    assert!(fitted.tokens <= total / 2 * LOW_WATER_PERCENT / 100 + 200);
}
