use std::sync::Arc;

use buddy_core::{
    ChatEvent, GuardAction, GuardKind, Price, ProviderError, StopReason, ToolChoice, ToolOutcome,
    Usd,
};
use buddy_engine::{Engine, LoopPolicy, OnLimit, TurnRequest};
use buddy_testkit::{RecordingProvider, ReplyProvider, TestTool, TestToolbox, reply_tokens};
use serde_json::json;

use super::{WORDS, call, run_turn, terminal};

/// A model that asks for a new, distinct call every time tools are offered.
fn runaway() -> ReplyProvider {
    ReplyProvider::new(|req, i| {
        Ok(if req.offers_tools() {
            reply_tokens("", vec![call(&format!("c{i}"), "item", json!({"id": i}))])
        } else {
            reply_tokens("Here is what I catalogued.", vec![])
        })
    })
}

fn items() -> TestToolbox {
    TestToolbox::new().with(
        "item",
        TestTool::new(|_, n| ToolOutcome::ok(format!("item is {}", WORDS[n % WORDS.len()]))),
    )
}

#[tokio::test]
async fn max_model_calls_with_on_limit_error_ends_with_an_error() {
    let policy = LoopPolicy {
        max_model_calls: 10,
        on_limit: OnLimit::Error,
        max_tool_calls: 100,
        ..LoopPolicy::default()
    };
    let (events, outcome) = run_turn(runaway(), items(), policy).await;
    assert_eq!(outcome.reason, StopReason::MaxModelCalls);
    assert_eq!(outcome.stats.model_calls, 10);
    assert_eq!(outcome.answer, None);
    assert!(matches!(
        terminal(&events),
        ChatEvent::Error {
            reason: StopReason::MaxModelCalls,
            ..
        }
    ));
    assert!(events.iter().any(|e| matches!(
        e,
        ChatEvent::GuardTripped {
            guard: GuardKind::ModelCallLimit,
            action: GuardAction::Error,
            ..
        }
    )));
    assert!(!events.iter().any(|e| matches!(e, ChatEvent::Done { .. })));
}

#[tokio::test]
async fn max_model_calls_reserves_the_last_call_to_answer_without_tools() {
    let provider = RecordingProvider::new(runaway());
    let requests = provider.requests();
    let policy = LoopPolicy {
        max_model_calls: 10,
        max_tool_calls: 100,
        ..LoopPolicy::default()
    };
    let (events, outcome) = run_turn(provider, items(), policy).await;
    assert_eq!(outcome.reason, StopReason::MaxModelCalls);
    assert_eq!(outcome.stats.model_calls, 10);
    assert_eq!(outcome.stats.tool_calls, 9);
    // The reply used none of the results, so buddy quotes them after it.
    let answer = outcome.answer.as_deref().unwrap_or_default();
    assert!(
        answer.starts_with("Here is what I catalogued.") && answer.contains("- item: item is"),
        "{answer}"
    );
    assert!(matches!(terminal(&events), ChatEvent::Done { .. }));
    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), 10);
    assert!(
        requests[..9]
            .iter()
            .all(|r| r.tools.is_some() && r.tool_choice.is_none())
    );
    let last = &requests[9];
    assert_eq!(
        (last.tools.as_deref(), last.tool_choice),
        (Some(&["item".to_owned()][..]), Some(ToolChoice::None)),
        "Finalize: tools defined but not callable"
    );
    assert!(
        last.messages
            .last()
            .and_then(|m| m.text())
            .is_some_and(|t| t.contains("Do not call any tools")),
        "Finalize carries an instruction to answer"
    );
}

#[tokio::test]
async fn max_tool_calls_refuses_the_rest_of_a_parallel_response_then_finalizes() {
    let provider = ReplyProvider::new(|req, i| {
        Ok(if req.offers_tools() {
            let calls = (0..3)
                .map(|k| call(&format!("c{i}_{k}"), "item", json!({"id": i * 3 + k})))
                .collect();
            reply_tokens("", calls)
        } else {
            reply_tokens("Done with what I have.", vec![])
        })
    });
    let policy = LoopPolicy {
        max_tool_calls: 4,
        ..LoopPolicy::default()
    };
    let (events, outcome) = run_turn(provider, items(), policy).await;
    assert_eq!(outcome.reason, StopReason::MaxToolCalls);
    assert_eq!(outcome.stats.tool_calls, 4);
    assert_eq!(outcome.stats.model_calls, 3);
    let refused = events
        .iter()
        .filter(|e| matches!(e, ChatEvent::ToolCallResult { content, is_error: true, .. } if content.contains("limit of 4 tool calls")))
        .count();
    assert_eq!(refused, 2);
}

#[tokio::test]
async fn per_skill_limit_withdraws_the_skill() {
    let policy = LoopPolicy {
        max_calls_per_skill: Some(2),
        ..LoopPolicy::default()
    };
    let (events, outcome) = run_turn(runaway(), items(), policy).await;
    assert_eq!(outcome.stats.tool_calls, 2);
    assert!(events.iter().any(|e| matches!(
        e,
        ChatEvent::GuardTripped {
            guard: GuardKind::SkillCallLimit,
            action: GuardAction::WithdrewSkill,
            ..
        }
    )));
    assert_eq!(outcome.reason, StopReason::ToolsExhausted);
    assert!(outcome.answer.is_some());
}

#[tokio::test]
async fn token_budget_sends_the_turn_to_finalize() {
    let policy = LoopPolicy {
        max_turn_tokens: Some(40),
        ..LoopPolicy::default()
    };
    // Every reply reports 10 input + 5 output tokens.
    let (_, outcome) = run_turn(runaway(), items(), policy).await;
    assert_eq!(outcome.reason, StopReason::TokenBudget);
    assert_eq!(
        outcome.stats.model_calls, 4,
        "3 calls reach 45 >= 40 tokens, the 4th is Finalize"
    );
    assert!(outcome.answer.is_some());
}

#[tokio::test]
async fn withdraw_tools_after_offers_no_tools_to_later_calls() {
    let provider = RecordingProvider::new(runaway());
    let requests = provider.requests();
    let policy = LoopPolicy {
        withdraw_tools_after: Some(2),
        ..LoopPolicy::default()
    };
    let (events, outcome) = run_turn(provider, items(), policy).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_eq!(outcome.stats.model_calls, 3);
    assert_eq!(requests.lock().unwrap()[2].tools, None);
    assert!(events.iter().any(|e| matches!(
        e,
        ChatEvent::GuardTripped {
            guard: GuardKind::ToolsWithdrawn,
            action: GuardAction::WithdrewAllTools,
            ..
        }
    )));
}

#[tokio::test]
async fn a_provider_error_ends_the_turn_with_an_error_event() {
    let provider = ReplyProvider::new(|_, _| {
        Err(ProviderError::Http {
            provider: "test".into(),
            url: "http://127.0.0.1:9/v1".into(),
            status: 401,
            message: "invalid api key".into(),
            retry_after: None,
        })
    });
    let (events, outcome) = run_turn(provider, items(), LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::ProviderError);
    match terminal(&events) {
        ChatEvent::Error { message, .. } => {
            assert!(message.contains("HTTP 401") && message.contains("invalid api key"))
        }
        other => panic!("expected an error event, got {other:?}"),
    }
}

#[tokio::test]
async fn a_fatal_skill_error_ends_the_turn() {
    let toolbox = TestToolbox::new().with(
        "item",
        TestTool::new(|_, _| ToolOutcome {
            content: "disk full".into(),
            is_error: true,
            fatal: true,
        }),
    );
    let (events, outcome) = run_turn(runaway(), toolbox, LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::SkillFailed);
    assert!(
        matches!(terminal(&events), ChatEvent::Error { message, .. } if message.contains("disk full"))
    );
}

#[tokio::test]
async fn a_reply_with_too_many_calls_runs_the_first_ones_and_tells_the_model() {
    let provider = RecordingProvider::new(ReplyProvider::new(|req, i| {
        Ok(if i == 0 && req.offers_tools() {
            let calls = (0..2000)
                .map(|k| call(&format!("c{k}"), "item", json!({ "id": k })))
                .collect();
            reply_tokens("", calls)
        } else {
            reply_tokens("Catalogued what ran.", vec![])
        })
    }));
    let requests = provider.requests();
    let toolbox = items();
    let executed = toolbox.executed();
    let policy = LoopPolicy {
        max_tool_calls: 10_000,
        ..LoopPolicy::default()
    };
    let (events, outcome) = run_turn(provider, toolbox, policy).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_eq!(executed.load(std::sync::atomic::Ordering::SeqCst), 128);
    assert!(events.iter().any(|e| matches!(
        e,
        ChatEvent::GuardTripped { guard: GuardKind::ToolCallLimit, action: GuardAction::Refused, detail, .. }
            if detail.contains("2000")
    )));
    let requests = requests.lock().unwrap();
    let second = &requests[1].messages;
    assert!(
        second
            .iter()
            .any(|m| m.text().is_some_and(|t| t.contains("1872 more tool calls"))),
        "the model is told"
    );
}

/// Runs one turn of `runaway()` for `model` at `price` under `policy`.
async fn priced_turn(
    model: &str,
    price: Option<Price>,
    policy: LoopPolicy,
) -> (Vec<ChatEvent>, buddy_engine::TurnOutcome) {
    let engine = Engine::new(Arc::new(runaway()), Arc::new(items()));
    let mut request = TurnRequest::new(model, "please help").with_policy(policy);
    if price.is_some() {
        request = request.with_price(price);
    }
    let (events, outcome) = engine.run_collect(request).await;
    buddy_testkit::assert_event_order(&events);
    (events, outcome)
}

#[tokio::test]
async fn a_money_budget_stops_the_turn_with_an_answer_within_it() {
    // Every reply reports 10 input + 5 output tokens: $0.01 + $0.01 = $0.02 a call.
    let price = Price::new(1_000.0, 2_000.0);
    let budget = Usd::from_dollars(0.10).unwrap();
    let policy = LoopPolicy {
        max_turn_cost_usd: Some(budget),
        max_tool_calls: 100,
        ..LoopPolicy::default()
    };
    let (events, outcome) = priced_turn("test-model", Some(price), policy).await;
    assert_eq!(outcome.reason, StopReason::CostBudget);
    assert!(outcome.answer.is_some(), "the Finalize call answered");
    // After 4 calls ($0.08) the next call and the answer would pass $0.10: the 5th call
    // is the answer, and the turn ends at its budget, not beyond.
    assert_eq!(outcome.stats.model_calls, 5);
    assert_eq!(outcome.stats.cost_usd, Some(budget));
    let per_call: Vec<Option<Usd>> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::IterationStats { cost_usd, .. } => Some(*cost_usd),
            _ => None,
        })
        .collect();
    assert_eq!(per_call, vec![Some(Usd::from_dollars(0.02).unwrap()); 5]);
    assert!(events.iter().any(|e| matches!(
        e,
        ChatEvent::GuardTripped { guard: GuardKind::CostBudget, detail, .. }
            if detail.contains("$0.0800 of $0.1000 spent")
    )));
}

#[tokio::test]
async fn a_money_budget_without_a_price_is_refused_not_ignored() {
    let policy = LoopPolicy {
        max_turn_cost_usd: Some(Usd::from_dollars(1.0).unwrap()),
        ..LoopPolicy::default()
    };
    let (_, outcome) = priced_turn("my-local-model", None, policy).await;
    assert_eq!(outcome.reason, StopReason::InvalidRequest);
    assert_eq!(outcome.stats.model_calls, 0);
    let message = outcome.error.unwrap_or_default();
    assert!(
        message.contains("my-local-model") && message.contains("prices"),
        "{message}"
    );
}

#[tokio::test]
async fn a_known_model_reports_its_cost_and_an_unknown_one_none() {
    let policy = LoopPolicy {
        max_tool_calls: 2,
        ..LoopPolicy::default()
    };
    let (_, priced) = priced_turn("gpt-4o-mini", None, policy.clone()).await;
    // gpt-4o-mini: $0.15 / $0.60 per million; each call 10 + 5 tokens.
    let calls = u64::from(priced.stats.model_calls);
    assert_eq!(
        priced.stats.cost_usd,
        Some(Usd::from_nanos(calls * (10 * 150 + 5 * 600))),
    );
    let (_, unknown) = priced_turn("my-local-model", None, policy).await;
    assert_eq!(unknown.stats.cost_usd, None);
}

/// A recorded stream (`../shared/fixtures`) as one model reply.
fn recorded(name: &str) -> buddy_testkit::MockResponse {
    let path = format!(
        "{}/../buddy-providers/tests/fixtures/streams/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    buddy_testkit::MockResponse::sse(std::fs::read(&path).unwrap())
}

#[tokio::test]
async fn a_turns_cost_is_its_recorded_usage_at_the_models_list_price() {
    use buddy_providers::{OpenAiOptions, OpenAiProvider};
    // OpenAI's recorded replies: a tool call (48 in, 19 out), then text (9 in, 2 out);
    // the second with 1,920 of 2,006 input tokens read from the cache (the same stream
    // with OpenAI's `prompt_tokens_details`).
    let cached_text = String::from_utf8(
        std::fs::read(format!(
            "{}/../buddy-providers/tests/fixtures/streams/openai_text_usage.sse",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap()
    .replace(
        r#""usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11"#,
        r#""usage":{"prompt_tokens":2006,"prompt_tokens_details":{"cached_tokens":1920},"completion_tokens":2,"total_tokens":2008"#,
    );
    let server = buddy_testkit::MockServer::sequence(vec![
        recorded("openai_single_tool_call_usage.sse"),
        buddy_testkit::MockResponse::sse(cached_text),
    ])
    .await;
    let provider = OpenAiProvider::new(OpenAiOptions {
        base_url: server.url(),
        ..OpenAiOptions::default()
    })
    .unwrap();
    let toolbox = TestToolbox::new().with("get_weather", TestTool::echo());
    let engine = Engine::new(Arc::new(provider), Arc::new(toolbox));
    // The recordings are gpt-4o's: $2.50 in, $10 out, $1.25 cached in, per million.
    let (events, outcome) = engine
        .run_collect(TurnRequest::new("gpt-4o-2024-08-06", "Weather in SF?"))
        .await;
    assert_eq!(outcome.reason, StopReason::Completed, "{events:?}");
    let first = Usd::from_dollars((48.0 * 2.5 + 19.0 * 10.0) / 1e6).unwrap();
    let second = Usd::from_dollars((86.0 * 2.5 + 1920.0 * 1.25 + 2.0 * 10.0) / 1e6).unwrap();
    let per_call: Vec<Option<Usd>> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::IterationStats { cost_usd, .. } => Some(*cost_usd),
            _ => None,
        })
        .collect();
    assert_eq!(per_call, vec![Some(first), Some(second)]);
    assert_eq!(outcome.stats.cost_usd, Some(first.saturating_add(second)));
    assert_eq!(outcome.stats.input_tokens, 48 + 2006);
}

#[tokio::test]
async fn a_budget_smaller_than_the_first_calls_input_makes_no_call() {
    // "please help" is a few tokens: at $1,000 per million input tokens, a few tenths of
    // a cent before any output. A budget of a tenth of a cent cannot hold it.
    let price = Price::new(1_000.0, 2_000.0);
    let policy = LoopPolicy {
        max_turn_cost_usd: Usd::from_dollars(0.001),
        ..LoopPolicy::default()
    };
    let (events, outcome) = priced_turn("test-model", Some(price), policy).await;
    assert_eq!(outcome.reason, StopReason::CostBudget, "{events:?}");
    assert_eq!(outcome.stats.model_calls, 0);
    assert_eq!(outcome.stats.cost_usd, None, "nothing was spent");
    assert!(
        outcome.answer.is_some_and(|a| !a.is_empty()),
        "buddy says why"
    );
    let detail = events
        .iter()
        .find_map(|e| match e {
            ChatEvent::GuardTripped {
                guard: GuardKind::CostBudget,
                detail,
                ..
            } => Some(detail.clone()),
            _ => None,
        })
        .unwrap();
    assert!(detail.contains("of $0.0010 spent"), "{detail}");
}
