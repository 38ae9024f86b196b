//! Counting and trimming a 200-message history, per model call.
//!
//! Run: `cargo bench -p buddy-engine --bench context`
//!
//! The engine counts each message once, when it joins the history, and then only
//! fits the cached counts before every call; `count_and_trim_per_call` is what a
//! runtime that recounts everything on every call would pay.

// Measurement code: a broken input should stop the benchmark loudly.
#![allow(clippy::unwrap_used)]

use buddy_core::{Message, ToolCall};
use buddy_engine::context::{BpeCounter, EstimateCounter, TokenCounter, fit};
use divan::Bencher;

fn main() {
    divan::main();
}

/// A system prompt, the user's request, then 99 rounds of a tool call and a ~1 KB result:
/// 200 messages, about 55,000 tokens.
fn history() -> Vec<Message> {
    let mut out = vec![
        Message::system("You are a careful operations assistant. Cite the tool results you use."),
        Message::user("Go through every service's logs and tell me what is failing."),
    ];
    for i in 0..99 {
        out.push(Message::Assistant {
            content: Some(format!("Checking service {i}.")),
            tool_calls: vec![ToolCall::new(
                format!("call_{i}"),
                "read_logs",
                format!("{{\"service\":\"svc-{i}\",\"lines\":40}}"),
            )],
        });
        let lines: String = (0..20)
            .map(|l| {
                format!(
                    "2026-11-22T04:{l:02}:00Z svc-{i} INFO request {l} served in {}ms\n",
                    10 + l * i % 97
                )
            })
            .collect();
        out.push(Message::tool_result(format!("call_{i}"), lines, false));
    }
    out
}

fn counts(counter: &dyn TokenCounter, history: &[Message]) -> Vec<usize> {
    history.iter().map(|m| counter.message(m)).collect()
}

#[divan::bench(args = ["o200k_base", "estimate"])]
fn count_200_messages(bencher: Bencher, counter: &str) {
    let history = history();
    let counter: Box<dyn TokenCounter> = match counter {
        "o200k_base" => Box::new(BpeCounter::o200k()),
        _ => Box::new(EstimateCounter),
    };
    bencher.bench(|| {
        counts(&*counter, divan::black_box(&history))
            .iter()
            .sum::<usize>()
    });
}

#[divan::bench]
fn trim_when_it_fits(bencher: Bencher) {
    let history = history();
    let counter = BpeCounter::o200k();
    let counts = counts(&counter, &history);
    let total = counts.iter().sum();
    bencher.bench(|| {
        fit(
            divan::black_box(&history),
            &counts,
            total,
            124_000,
            &counter,
        )
        .unwrap()
        .tokens
    });
}

#[divan::bench(args = [32_000, 8_000])]
fn trim_to_budget(bencher: Bencher, budget: usize) {
    let history = history();
    let counter = BpeCounter::o200k();
    let counts = counts(&counter, &history);
    let total = counts.iter().sum();
    bencher.bench(|| {
        fit(divan::black_box(&history), &counts, total, budget, &counter)
            .unwrap()
            .tokens
    });
}

#[divan::bench]
fn count_and_trim_per_call(bencher: Bencher) {
    let history = history();
    let counter = BpeCounter::o200k();
    bencher.bench(|| {
        let counts = counts(&counter, divan::black_box(&history));
        let total = counts.iter().sum();
        fit(&history, &counts, total, 32_000, &counter)
            .unwrap()
            .tokens
    });
}
