//! Model calls a tool makes for its server (MCP sampling) through its context's budget:
//! drawn from the turn's pool of model calls, tokens and money, refused past it, shown
//! as `tool_sampling` events and counted in the turn's `done` stats — never renumbering
//! the turn's own model calls.

use buddy_core::{
    BoxFuture, ChatEvent, RepeatSemantics, SkillContext, StopReason, ToolCall, ToolOutcome,
    ToolSpec, Toolbox, Usage,
};
use buddy_engine::{LoopPolicy, OnLimit};
use buddy_testkit::{ReplyProvider, reply_tokens};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{call, run_turn};

/// `summarize`, which asks for `draws` model calls through its context's budget, each
/// using `tokens` (half in, half out), and returns which it got.
struct Sampling {
    specs: Vec<ToolSpec>,
    draws: usize,
    tokens: u64,
}

impl Sampling {
    fn new(draws: usize, tokens: u64) -> Self {
        Sampling {
            specs: vec![ToolSpec {
                name: "summarize".into(),
                description: "Summarizes, asking the model for help.".into(),
                parameters: json!({"type": "object", "properties": {}}),
            }],
            draws,
            tokens,
        }
    }
}

impl Toolbox for Sampling {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }
    fn semantics(&self, _: &str) -> Option<RepeatSemantics> {
        Some(RepeatSemantics::Effectful)
    }
    fn invoke<'a>(&'a self, _: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let Some(budget) = ctx.budget else {
                return ToolOutcome::error("no budget in the context");
            };
            let mut got = Vec::new();
            for _ in 0..self.draws {
                let drawn = budget.draw("srv").await;
                if drawn.is_ok() {
                    let usage = Usage {
                        input_tokens: self.tokens / 2,
                        output_tokens: self.tokens / 2,
                        ..Usage::default()
                    };
                    budget.book("srv", "m", Some(usage)).await;
                }
                got.push(if drawn.is_ok() { "sampled" } else { "refused" });
            }
            ToolOutcome::ok(got.join(", "))
        })
    }
}

/// Calls `summarize` while no result is in, then answers.
fn model() -> ReplyProvider {
    ReplyProvider::new(|req, _| {
        let result = req.messages.iter().find_map(|m| match m {
            buddy_core::Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        });
        Ok(match result {
            Some(result) => reply_tokens(&format!("Done: {result}"), vec![]),
            None => reply_tokens("", vec![call("c1", "summarize", json!({}))]),
        })
    })
}

/// The `tool_sampling` events: refused or not, and the tokens booked.
fn sampled(events: &[ChatEvent]) -> Vec<(bool, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::ToolSampling {
                id,
                name,
                server,
                input_tokens,
                output_tokens,
                refused,
                ..
            } => {
                assert_eq!(
                    (id.as_str(), name.as_str(), server.as_str()),
                    ("c1", "summarize", "srv")
                );
                Some((refused.is_some(), input_tokens + output_tokens))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn draws_past_the_model_calls_are_refused_and_the_done_stats_count_the_rest() {
    // on_limit = error holds no call back for an answer: of 3, the round takes one, the
    // tool two, and its third draw would pass the cap.
    let toolbox = Sampling::new(3, 10);
    let policy = LoopPolicy {
        max_model_calls: 3,
        on_limit: OnLimit::Error,
        ..LoopPolicy::default()
    };
    let (events, outcome) = run_turn(model(), toolbox, policy).await;
    assert_eq!(sampled(&events), [(false, 10), (false, 10), (true, 0)]);
    let refusal = events.iter().find_map(|e| match e {
        ChatEvent::ToolSampling {
            refused: Some(why), ..
        } => Some(why.clone()),
        _ => None,
    });
    assert_eq!(
        refusal.as_deref(),
        Some(
            "buddy refused the sampling request: the turn's 3 model calls (policy max_model_calls) \
             are spent or held for its answer; it draws from the same budget as the turn that called \
             the tool"
        )
    );
    // The pool is spent: the turn stops before another model call.
    assert_eq!(outcome.reason, StopReason::MaxModelCalls, "{outcome:?}");
    assert_eq!(outcome.stats.model_calls, 3);
    assert!(outcome.stats.input_tokens + outcome.stats.output_tokens >= 20);
    let Some(ChatEvent::Error { stats, .. } | ChatEvent::Done { stats, .. }) = events.last() else {
        panic!("no terminal event")
    };
    assert_eq!(stats.model_calls, 3);
    // The turn's own model calls keep their numbers (run_turn checks they count up).
    let numbers: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::IterationStats { model_call, .. } => Some(*model_call),
            _ => None,
        })
        .collect();
    assert_eq!(numbers, [1]);
}

#[tokio::test]
async fn with_the_answer_held_back_the_turn_still_answers_within_its_calls() {
    let toolbox = Sampling::new(3, 10);
    let policy = LoopPolicy {
        max_model_calls: 3,
        ..LoopPolicy::default()
    };
    let (events, outcome) = run_turn(model(), toolbox, policy).await;
    // 1 round + the answer's call held: one draw is left.
    assert_eq!(sampled(&events), [(false, 10), (true, 0), (true, 0)]);
    assert_eq!(outcome.stats.model_calls, 3, "{outcome:?}");
    let Some(ChatEvent::Done { answer, stats, .. }) = events.last() else {
        panic!("{:?}", events.last())
    };
    assert_eq!(answer, "Done: sampled, refused, refused");
    assert_eq!(stats.model_calls, 3);
}

#[tokio::test]
async fn draws_stop_once_the_turns_tokens_are_spent() {
    let toolbox = Sampling::new(3, 80);
    let policy = LoopPolicy {
        max_turn_tokens: Some(100),
        ..LoopPolicy::default()
    };
    let (events, outcome) = run_turn(model(), toolbox, policy).await;
    // A draw is granted while the budget is not yet spent, as a model call is: the
    // first leaves the turn under 100 tokens, the second takes it past, the third is
    // refused; the turn then answers on its token budget.
    let got: Vec<bool> = sampled(&events).into_iter().map(|(r, _)| r).collect();
    assert_eq!(got, [false, false, true]);
    assert_eq!(outcome.reason, StopReason::TokenBudget, "{outcome:?}");
    assert_eq!(
        outcome.stats.model_calls,
        1 + 2 + 1,
        "the round, two draws, the answer"
    );
}
