//! Token counts against published figures, the trimming invariants for random
//! histories, and the engine's use of both.

use std::borrow::Cow;

use buddy_core::{ChatEvent, Message, StopReason, ToolCall, ToolSpec};
use buddy_engine::context::{BpeCounter, EstimateCounter, Overflow, TokenCounter, fit};
use buddy_engine::{LoopPolicy, check_history};
use buddy_testkit::{RecordingProvider, ReplyProvider, TestToolbox, reply_tokens};
use proptest::prelude::*;
use serde_json::json;

use super::run_turn;

// Known counts from the OpenAI cookbook, "How to count tokens with tiktoken",
// https://github.com/openai/openai-cookbook/blob/main/examples/How_to_count_tokens_with_tiktoken.ipynb
// (commit c81359cdc6744f001e40c08a192604c5113fdab3): sections 4-5 list each string's
// tokens per encoding; sections 6-7 compare the message and tool formulas with the
// prompt_tokens the OpenAI API reported.

#[test]
fn string_counts_match_the_cookbook() {
    let (o200k, cl100k) = (BpeCounter::o200k(), BpeCounter::cl100k());
    for (text, cl, o) in [
        ("tiktoken is great!", 6, 6),
        ("antidisestablishmentarianism", 6, 6),
        ("2 + 2 = 4", 7, 7),
        ("お誕生日おめでとう", 9, 8),
    ] {
        assert_eq!(cl100k.text(text), cl, "cl100k_base: {text}");
        assert_eq!(o200k.text(text), o, "o200k_base: {text}");
    }
}

#[test]
fn chat_counts_match_what_the_api_reported() {
    let messages = [
        (
            "system",
            None,
            "You are a helpful, pattern-following assistant that translates corporate jargon into plain English.",
        ),
        (
            "system",
            Some("example_user"),
            "New synergies will help drive top-line growth.",
        ),
        (
            "system",
            Some("example_assistant"),
            "Things working well together will increase revenue.",
        ),
        (
            "system",
            Some("example_user"),
            "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
        ),
        (
            "system",
            Some("example_assistant"),
            "Let's talk later when we're less busy about how to do better.",
        ),
        (
            "user",
            None,
            "This late pivot means we don't have time to boil the ocean for the client deliverable.",
        ),
    ];
    assert_eq!(
        BpeCounter::cl100k().chat(&messages),
        129,
        "gpt-4 / gpt-3.5-turbo"
    );
    assert_eq!(
        BpeCounter::o200k().chat(&messages),
        124,
        "gpt-4o / gpt-4o-mini"
    );
}

#[test]
fn tool_definition_counts_match_what_the_api_reported() {
    let tools = [ToolSpec {
        name: "get_current_weather".into(),
        description: "Get the current weather in a given location".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "description": "The unit of temperature to return", "enum": ["celsius", "fahrenheit"]}
            },
            "required": ["location"]
        }),
    }];
    let messages = [
        (
            "system",
            None,
            "You are a helpful assistant that can answer to questions about the weather.",
        ),
        ("user", None, "What's the weather like in San Francisco?"),
    ];
    for (counter, expected) in [(BpeCounter::cl100k(), 105), (BpeCounter::o200k(), 101)] {
        assert_eq!(
            counter.chat(&messages) + counter.tools(&tools),
            expected,
            "{}",
            counter.name()
        );
    }
    // buddy's own message counting agrees with the cookbook's for plain messages.
    let o200k = BpeCounter::o200k();
    let ours: usize = [Message::system(messages[0].2), Message::user(messages[1].2)]
        .iter()
        .map(|m| o200k.message(m))
        .sum::<usize>()
        + o200k.reply_priming();
    assert_eq!(ours, o200k.chat(&messages));
}

/// A random history: optional system prompts, then turns of a user message and
/// rounds of (possibly parallel) tool calls with results of any size.
fn history() -> impl Strategy<Value = Vec<Message>> {
    let round = (
        1usize..4,
        prop::collection::vec(0usize..6000, 3),
        any::<bool>(),
    );
    let turn = (
        1usize..400,
        prop::collection::vec(round, 0..5),
        prop::option::of(1usize..300),
    );
    (0usize..3, prop::collection::vec(turn, 1..5), any::<bool>()).prop_map(
        |(systems, turns, trailing_user)| {
            let mut out: Vec<Message> = (0..systems)
                .map(|i| Message::system(format!("rule {i} {}", "s".repeat(40))))
                .collect();
            let mut id = 0;
            for (user_len, rounds, answer) in turns {
                out.push(Message::user(format!("question {}", "u".repeat(user_len))));
                for (calls, sizes, narration) in rounds {
                    let ids: Vec<String> = (0..calls)
                        .map(|_| {
                            id += 1;
                            format!("c{id}")
                        })
                        .collect();
                    out.push(Message::Assistant {
                        content: narration.then(|| "Let me check.".to_owned()),
                        tool_calls: ids
                            .iter()
                            .map(|i| ToolCall::new(i.clone(), "read", "{\"p\":1}"))
                            .collect(),
                    });
                    for (k, i) in ids.iter().enumerate() {
                        out.push(Message::tool_result(
                            i.clone(),
                            format!("{i}: {}", "r ".repeat(sizes[k % 3] / 2)),
                            false,
                        ));
                    }
                }
                if let Some(len) = answer {
                    out.push(Message::assistant("a".repeat(len)));
                }
            }
            if trailing_user {
                out.push(Message::user("and now?"));
            }
            out
        },
    )
}

/// True when `kept` could have come from `original` (a truncated result keeps its head
/// and its tail, with the marker between them, or only a marker saying it was left out).
fn same_or_cut(kept: &Message, original: &Message) -> bool {
    match (kept, original) {
        (
            Message::Tool {
                tool_call_id: a,
                content: ca,
                ..
            },
            Message::Tool {
                tool_call_id: b,
                content: cb,
                ..
            },
        ) => {
            a == b
                && (ca == cb
                    || ca.starts_with("[system note: a result of about")
                    || ca
                        .split_once("\n[system note: this result was cut")
                        .is_some_and(|(head, rest)| {
                            let tail = rest.split_once("are kept]\n").map_or("", |(_, t)| t);
                            cb.starts_with(head) && cb.ends_with(tail)
                        }))
        }
        _ => kept == original,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn trimmed_histories_are_valid_for_both_apis_and_fit(history in history(), budget in 60usize..6000) {
        let counter = EstimateCounter;
        let counts: Vec<usize> = history.iter().map(|m| counter.message(m)).collect();
        let total: usize = counts.iter().sum();
        let systems: Vec<&Message> = history.iter().take_while(|m| matches!(m, Message::System { .. })).collect();
        let latest_user = history.iter().rfind(|m| m.is_user()).cloned().unwrap();
        match fit(&history, &counts, total, budget, &counter) {
            Ok(fitted) => {
                let kept = &fitted.messages;
                // Valid: a user message, every call paired with its result (both APIs' rule).
                prop_assert!(check_history(kept).is_ok(), "{:?}", check_history(kept));
                // Pinned: the system prompt(s) first, and the latest user message.
                for (i, system) in systems.iter().enumerate() {
                    prop_assert_eq!(&kept[i], *system);
                }
                prop_assert_eq!(kept.iter().rfind(|m| m.is_user()), Some(&latest_user), "the latest user message is kept, last");
                // Anthropic: system only up front, and the conversation starts with a user.
                let first_other = kept.iter().position(|m| !matches!(m, Message::System { .. })).unwrap();
                prop_assert!(kept[first_other].is_user(), "the conversation must start with a user message");
                let later_system = kept[first_other..].iter().any(|m| matches!(m, Message::System { .. }));
                prop_assert!(!later_system, "system messages only up front");
                // It fits, and the reported count is the real count.
                let recount: usize = kept.iter().map(|m| counter.message(m)).sum::<usize>() + counter.reply_priming();
                prop_assert_eq!(recount, fitted.tokens);
                prop_assert!(fitted.tokens <= budget, "{} > {}", fitted.tokens, budget);
                // Nothing invented: every kept message is an original (or its cut head), in order.
                let mut cursor = 0;
                for message in kept.iter().filter(|m| !m.text().is_some_and(|t| t.starts_with("[system note] "))) {
                    let found = history[cursor..].iter().position(|o| same_or_cut(message, o));
                    prop_assert!(found.is_some(), "{:?} is not from the history", message);
                    cursor += found.unwrap_or(0) + 1;
                }
                if let Cow::Borrowed(_) = fitted.messages {
                    prop_assert!(total + counter.reply_priming() <= budget);
                }
            }
            Err(Overflow { needed, budget: b, .. }) => {
                prop_assert_eq!(b, budget);
                prop_assert!(needed > budget);
                // Only when what must stay cannot fit: the pinned messages alone, plus the
                // newest group with its results at their smallest, exceed the budget.
                let pinned: usize = systems.iter().map(|m| counter.message(m)).sum::<usize>() + counter.message(&latest_user);
                let last = history.len() - 1;
                let newest_min: usize = if history[last] == latest_user {
                    0
                } else {
                    let start = history[..=last].iter().rposition(|m| matches!(m, Message::Assistant { .. })).unwrap_or(last);
                    history[start..].iter().zip(&counts[start..]).map(|(m, c)| if matches!(m, Message::Tool { .. }) { (*c).min(56) } else { *c }).sum()
                };
                prop_assert!(pinned + newest_min + counter.reply_priming() > budget / 2, "overflow reported with room to spare");
            }
        }
    }
}

#[tokio::test]
async fn pinned_messages_that_cannot_fit_end_the_turn_with_context_overflow() {
    let provider =
        RecordingProvider::new(ReplyProvider::new(|_, _| Ok(reply_tokens("hi", vec![]))));
    let requests = provider.requests();
    let policy = LoopPolicy {
        context_window: Some(256),
        ..LoopPolicy::default()
    };
    let engine = buddy_engine::Engine::new(
        std::sync::Arc::new(provider),
        std::sync::Arc::new(TestToolbox::new()),
    );
    let request = buddy_engine::TurnRequest::new("gpt-4o", "x ".repeat(2000)).with_policy(policy);
    let (events, outcome) = engine.run_collect(request).await;
    assert_eq!(outcome.reason, StopReason::ContextOverflow);
    match events.last() {
        Some(ChatEvent::Error { message, .. }) => {
            assert!(
                message.contains("256 token window") && message.contains("raise context_window"),
                "{message}"
            )
        }
        other => panic!("expected an error, got {other:?}"),
    }
    assert!(requests.lock().unwrap().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn a_small_window_keeps_only_the_tools_the_conversation_called_before_overflowing() {
    // A hundred tools do not fit a 2,048-token window even without their details; the
    // one tool the conversation used does.
    let toolbox = (0..100).fold(TestToolbox::new(), |tb, n| {
        tb.with(
            &format!("inventory_lookup_tool_number_{n}"),
            buddy_testkit::TestTool::new(|_, _| buddy_core::ToolOutcome::ok("12 in stock")),
        )
    });
    let provider = RecordingProvider::new(ReplyProvider::new(|_, _| {
        Ok(reply_tokens("There are 12 in stock.", vec![]))
    }));
    let requests = provider.requests();
    let engine =
        buddy_engine::Engine::new(std::sync::Arc::new(provider), std::sync::Arc::new(toolbox));
    let history = vec![
        Message::user("How many widgets?"),
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall::new(
                "c1",
                "inventory_lookup_tool_number_7",
                r#"{"item":"widget"}"#,
            )],
        },
        Message::tool_result("c1", "12 in stock", false),
        Message::assistant("12."),
    ];
    let policy = LoopPolicy {
        context_window: Some(2048),
        ..LoopPolicy::default()
    };
    let request = buddy_engine::TurnRequest::new("gpt-4o", "And how many are there now?")
        .with_history(history)
        .with_policy(policy);
    let (events, outcome) = engine.run_collect(request).await;
    assert_eq!(outcome.reason, StopReason::Completed, "{events:?}");
    let requests = requests.lock().unwrap();
    assert_eq!(
        requests[0].tools.as_deref(),
        Some(&["inventory_lookup_tool_number_7".to_owned()][..])
    );
    assert!(
        events.iter().any(|e| matches!(e, ChatEvent::GuardTripped { action: buddy_core::GuardAction::Shed, detail, .. }
            if detail.contains("the tools the conversation has not called"))),
        "{events:?}"
    );
}

#[tokio::test]
async fn iteration_stats_report_the_window_and_how_full_it_is() {
    let policy = LoopPolicy {
        context_window: Some(50_000),
        reserve_output_tokens: Some(1_000),
        ..LoopPolicy::default()
    };
    let provider = ReplyProvider::new(|_, _| Ok(reply_tokens("hello", vec![])));
    let (events, _) = run_turn(provider, TestToolbox::new(), policy).await;
    let stats = events.iter().find_map(|e| match e {
        ChatEvent::IterationStats {
            context_tokens,
            context_window,
            ..
        } => Some((*context_tokens, *context_window)),
        _ => None,
    });
    let (used, window) = stats.unwrap();
    assert_eq!(window, 50_000);
    assert!(used > 0 && used < 100, "{used}");
}

/// A model server with a smaller window than buddy thinks: it refuses any request whose
/// messages hold more than `limit` characters, in llama-cpp-python's words.
fn refusing_model(limit: usize, rounds: usize) -> ReplyProvider {
    ReplyProvider::new(move |req, i| {
        let size: usize = req
            .messages
            .iter()
            .filter_map(Message::text)
            .map(str::len)
            .sum();
        if size > limit {
            return Err(buddy_core::ProviderError::Http {
                provider: "llama".into(),
                url: "http://127.0.0.1:8080/v1/chat/completions".into(),
                status: 400,
                message: format!(
                    "Requested tokens ({}) exceed context window of 2048",
                    size / 3
                ),
                retry_after: None,
            });
        }
        // The next part after the latest one read (older results may be trimmed away).
        let done = req
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Tool { content, .. } => content
                    .split('}')
                    .next()
                    .and_then(|head| head.rsplit(':').next())
                    .and_then(|n| n.trim().parse::<usize>().ok())
                    .map(|n| n + 1),
                _ => None,
            })
            .unwrap_or(0);
        if done < rounds && req.offers_tools() {
            Ok(reply_tokens(
                "",
                vec![ToolCall::new(
                    format!("c{i}"),
                    "read",
                    json!({"part": done}).to_string(),
                )],
            ))
        } else {
            Ok(reply_tokens("Summary: part 0 to part 5 read.", vec![]))
        }
    })
}

fn big_reader() -> TestToolbox {
    TestToolbox::new().with(
        "read",
        buddy_testkit::TestTool::new(|call, _| {
            buddy_core::ToolOutcome::ok(format!(
                "{} {}",
                call.arguments,
                "lorem ipsum ".repeat(200)
            ))
        }),
    )
}

#[tokio::test]
async fn a_context_length_refusal_is_trimmed_harder_and_retried_once() {
    // 6 results of ~2,400 characters: the window (as buddy estimates it) holds them
    // all, the server refuses anything over 8,000 characters.
    let (events, outcome) = run_turn(
        refusing_model(8_000, 6),
        big_reader(),
        LoopPolicy::default(),
    )
    .await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("Summary: part 0 to part 5 read.")
    );
    let refusals = events
        .iter()
        .filter(|e| matches!(e, ChatEvent::GuardTripped { detail, .. } if detail.contains("refused the request as too long")))
        .count();
    assert_eq!(
        refusals, 1,
        "one refusal, then the tighter budget holds for the turn"
    );
    // 6 tool rounds + the answer; the refused request produced no reply and is not counted.
    assert_eq!(outcome.stats.model_calls, 7);
}

#[tokio::test]
async fn refused_even_trimmed_the_turn_answers_from_the_tool_results() {
    // Everything after the first result is refused, trimmed or not.
    let (events, outcome) =
        run_turn(refusing_model(100, 6), big_reader(), LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::ContextOverflow);
    let answer = outcome.answer.expect("an answer from the results");
    assert!(
        answer.contains("What the tools returned") && answer.contains("lorem ipsum"),
        "{answer}"
    );
    assert!(matches!(
        events.last(),
        Some(ChatEvent::Done {
            reason: StopReason::ContextOverflow,
            ..
        })
    ));
}

#[tokio::test]
async fn refused_with_no_tool_results_the_turn_ends_with_an_error_that_says_what_to_do() {
    let (events, outcome) = run_turn(
        refusing_model(1, 0),
        TestToolbox::new(),
        LoopPolicy::default(),
    )
    .await;
    assert_eq!(outcome.reason, StopReason::ContextOverflow);
    match events.last() {
        Some(ChatEvent::Error { message, .. }) => {
            assert!(message.contains("context_window"), "{message}")
        }
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn an_overflow_names_what_is_too_big() {
    // The model's own reply: one call with ~200 KB of arguments, in a 4,096-token window.
    let provider = ReplyProvider::new(|req, i| {
        Ok(if req.offers_tools() && i == 0 {
            let huge = "x".repeat(200_000);
            reply_tokens(
                "",
                vec![ToolCall::new(
                    "c0",
                    "read",
                    json!({"part": huge}).to_string(),
                )],
            )
        } else {
            reply_tokens("Done.", vec![])
        })
    });
    let policy = LoopPolicy {
        context_window: Some(4096),
        ..LoopPolicy::default()
    };
    let (events, outcome) = run_turn(provider, big_reader(), policy).await;
    assert_eq!(outcome.reason, StopReason::ContextOverflow);
    match events.last() {
        Some(ChatEvent::Error { message, .. }) => assert!(
            message.contains("the tool calls of the model's latest reply")
                && message.contains("max_reply_bytes"),
            "{message}"
        ),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// Keeps what a turn records, with the counts it records them with.
#[derive(Default)]
struct CountingSink(std::sync::Mutex<Vec<(Message, Option<buddy_core::TokenCount>)>>);

impl buddy_core::MessageSink for CountingSink {
    fn record<'a>(
        &'a self,
        message: &'a Message,
    ) -> buddy_core::BoxFuture<'a, Result<(), buddy_core::RecordError>> {
        self.0.lock().unwrap().push((message.clone(), None));
        Box::pin(async { Ok(()) })
    }
    fn record_counted<'a>(
        &'a self,
        message: &'a Message,
        count: buddy_core::TokenCount,
    ) -> buddy_core::BoxFuture<'a, Result<(), buddy_core::RecordError>> {
        self.0.lock().unwrap().push((message.clone(), Some(count)));
        Box::pin(async { Ok(()) })
    }
}

/// A reply as `reply_tokens` makes it, its usage reporting `input_tokens` (none: no usage).
fn reply_reporting(
    input_tokens: Option<u64>,
) -> Vec<Result<buddy_core::Token, buddy_core::ProviderError>> {
    let mut tokens = reply_tokens("ok", vec![]);
    for token in &mut tokens {
        if let Ok(buddy_core::Token::Finish { usage, .. }) = token {
            *usage = input_tokens.map(|n| buddy_core::Usage {
                input_tokens: n,
                ..usage.unwrap_or_default()
            });
        }
    }
    tokens
}

/// The `context_tokens` a gpt-4o turn over `history` (with `counts`) reports for its one
/// model call, its provider's usage saying `input_tokens` (none: no usage at all).
async fn context_reported(
    history: Vec<Message>,
    counts: Vec<Option<buddy_core::TokenCount>>,
    input_tokens: Option<u64>,
) -> u64 {
    let engine = buddy_engine::Engine::new(
        std::sync::Arc::new(ReplyProvider::new(move |_, _| {
            Ok(reply_reporting(input_tokens))
        })),
        std::sync::Arc::new(TestToolbox::new()),
    );
    let request = buddy_engine::TurnRequest::new("gpt-4o", "and now?")
        .with_history(history)
        .with_history_counts(counts);
    let (events, _) = engine.run_collect(request).await;
    events
        .iter()
        .find_map(|e| match e {
            ChatEvent::IterationStats { context_tokens, .. } => Some(*context_tokens),
            _ => None,
        })
        .unwrap()
}

/// The context a turn over `history` (with `counts`) reports to a provider that reports
/// no usage: buddy's own count.
async fn context_of(history: Vec<Message>, counts: Vec<Option<buddy_core::TokenCount>>) -> u64 {
    context_reported(history, counts, None).await
}

#[tokio::test]
async fn context_tokens_are_the_providers_count_when_it_gives_one() {
    assert_eq!(
        context_reported(vec![], Vec::new(), Some(1_234)).await,
        1_234
    );
    // A server that fills usage with zeros has not counted: buddy's exact count stands in.
    let own = context_of(vec![], Vec::new()).await;
    assert!(own > 0);
    assert_eq!(context_reported(vec![], Vec::new(), Some(0)).await, own);
}

#[tokio::test]
async fn counts_kept_with_a_history_are_used_only_when_made_the_same_way() {
    let o200k = BpeCounter::o200k();
    let key = buddy_engine::context::count_key(&o200k);
    assert_eq!(
        key,
        format!("o200k_base/{}", buddy_engine::context::COUNT_FORMULA)
    );
    let history = vec![
        Message::user("What is the capital of France?"),
        Message::assistant("Paris."),
    ];
    let counted = context_of(history.clone(), Vec::new()).await;
    // A kept count is taken as it is (one deliberately far off shows it was not recounted).
    let kept = |tokens| {
        Some(buddy_core::TokenCount {
            encoding: key.clone(),
            tokens,
        })
    };
    let exact = o200k.message(&history[0]) as u64;
    assert_eq!(
        context_of(history.clone(), vec![kept(exact)]).await,
        counted
    );
    assert_eq!(
        context_of(history.clone(), vec![kept(exact + 1_000)]).await,
        counted + 1_000
    );
    // Counts made another way (another encoding, an older formula) are made again.
    for other in ["cl100k_base/1", "o200k_base/0", "estimate/1"] {
        let stale = Some(buddy_core::TokenCount {
            encoding: other.into(),
            tokens: exact + 1_000,
        });
        assert_eq!(
            context_of(history.clone(), vec![stale]).await,
            counted,
            "{other}"
        );
    }

    // Every message the turn adds is recorded with the count it was made with.
    let sink = std::sync::Arc::new(CountingSink::default());
    let engine = buddy_engine::Engine::new(
        std::sync::Arc::new(ReplyProvider::new(|_, i| {
            Ok(match i {
                0 => reply_tokens("", vec![ToolCall::new("c1", "echo", r#"{"text":"hi"}"#)]),
                _ => reply_tokens("done", vec![]),
            })
        })),
        std::sync::Arc::new(TestToolbox::new()),
    );
    let request = buddy_engine::TurnRequest::new("gpt-4o", "echo hi")
        .with_recorder(std::sync::Arc::clone(&sink) as std::sync::Arc<dyn buddy_core::MessageSink>);
    let (_, outcome) = engine.run_collect(request).await;
    // The outcome carries the same counts beside its messages, for the next turn.
    assert_eq!(outcome.counts.len(), outcome.messages.len());
    for (message, count) in outcome.messages.iter().zip(&outcome.counts) {
        let count = count.as_ref().unwrap();
        assert_eq!(
            (count.encoding.as_str(), count.tokens),
            (key.as_str(), o200k.message(message) as u64)
        );
    }
    let recorded = sink.0.lock().unwrap();
    assert_eq!(recorded.len(), 4, "{recorded:?}");
    for (message, count) in recorded.iter() {
        let count = count.as_ref().expect("recorded with its count");
        assert_eq!(count.encoding, key);
        assert_eq!(count.tokens, o200k.message(message) as u64, "{message:?}");
    }
}

/// One run of a turn: its guard details, history and model calls, and how many of its
/// messages came back without an exact count.
type Run = ((Vec<String>, Vec<Message>, u32), usize);

/// A gpt-4o turn (o200k counts) run twice: once with a recorder, which has every message
/// counted exactly as it comes, once without, where cheap upper bounds stand in until the
/// window needs exact counts.
async fn both_ways(provider: fn() -> ReplyProvider, policy: LoopPolicy) -> [Run; 2] {
    let run = |recorded: bool| {
        let policy = policy.clone();
        async move {
            let engine = buddy_engine::Engine::new(
                std::sync::Arc::new(provider()),
                std::sync::Arc::new(big_reader()),
            );
            let mut request =
                buddy_engine::TurnRequest::new("gpt-4o", "please help").with_policy(policy);
            if recorded {
                request = request.with_recorder(std::sync::Arc::new(CountingSink::default()));
            }
            let (events, outcome) = engine.run_collect(request).await;
            let guards = events
                .iter()
                .filter_map(|e| match e {
                    ChatEvent::GuardTripped { detail, .. } => Some(detail.clone()),
                    _ => None,
                })
                .collect();
            let uncounted = outcome.counts.iter().filter(|c| c.is_none()).count();
            (
                (guards, outcome.messages, outcome.stats.model_calls),
                uncounted,
            )
        }
    };
    [run(true).await, run(false).await]
}

#[tokio::test]
async fn bounds_in_place_of_exact_counts_never_change_what_a_turn_does() {
    // Far from the window; a refusal (the retry is cut to 60 % of the exact size sent);
    // a window the bounds overflow but the exact counts fit; one that must trim.
    let providers: [fn() -> ReplyProvider; 4] = [
        || refusing_model(usize::MAX, 6),
        || refusing_model(8_000, 6),
        || refusing_model(usize::MAX, 6),
        || refusing_model(usize::MAX, 6),
    ];
    let windows = [None, None, Some(6_000), Some(2_200)];
    let mut seen = Vec::new();
    for (provider, window) in providers.into_iter().zip(windows) {
        let policy = LoopPolicy {
            context_window: window,
            reserve_output_tokens: window.map(|_| 500),
            ..LoopPolicy::default()
        };
        let [(exact, all_counted), (bounded, uncounted)] = both_ways(provider, policy).await;
        assert_eq!(exact, bounded, "window {window:?}");
        assert_eq!(all_counted, 0, "a recorder has every message counted");
        seen.push((exact.0, uncounted));
    }
    // Far from the window nothing was counted exactly (14 messages: prompt, 6 rounds, answer).
    assert_eq!(seen[0], (Vec::new(), 14));
    assert!(
        seen[1]
            .0
            .iter()
            .any(|d| d.contains("refused the request as too long")),
        "{:?}",
        seen[1]
    );
    assert!(seen[2].0.is_empty(), "exact counts fit: {:?}", seen[2]);
    assert!(
        seen[2].1 < 14,
        "the window needed exact counts: {:?}",
        seen[2]
    );
    assert!(
        seen[3].0.iter().any(|d| d.contains("left out")),
        "{:?}",
        seen[3]
    );
}

#[tokio::test]
async fn a_small_window_fits_a_wide_parallel_round_of_big_results() {
    // A small model asks for 30 reads at once, each 2 KB: the round the model must see
    // whole is far larger than a 2,048-token window.
    let provider = ReplyProvider::new(|req, _| {
        let answered = req
            .messages
            .iter()
            .any(|m| matches!(m, Message::Tool { .. }));
        Ok(if answered {
            reply_tokens("Thirty files read.", vec![])
        } else {
            let calls = (0..30)
                .map(|i| {
                    ToolCall::new(
                        format!("c{i}"),
                        "read",
                        json!({"path": format!("f{i}.txt")}).to_string(),
                    )
                })
                .collect();
            reply_tokens("", calls)
        })
    });
    let toolbox = TestToolbox::new().with(
        "read",
        buddy_testkit::TestTool::new(|_, _| {
            buddy_core::ToolOutcome::ok("lorem ipsum dolor sit amet ".repeat(80))
        }),
    );
    let policy = LoopPolicy {
        context_window: Some(2048),
        ..LoopPolicy::default()
    };
    let (events, outcome) = run_turn(provider, toolbox, policy).await;
    let error = events.iter().find_map(|e| match e {
        ChatEvent::Error { message, .. } => Some(message.clone()),
        _ => None,
    });
    assert_eq!(outcome.reason, StopReason::Completed, "{error:?}");
    assert_eq!(outcome.answer.as_deref(), Some("Thirty files read."));
    // The history keeps every result whole; only the request was cut.
    assert!(outcome.messages.iter().all(|m| match m {
        Message::Tool { content, .. } => content.len() == 27 * 80,
        _ => true,
    }));
}
