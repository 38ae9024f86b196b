//! Generated agent behaviours against the default guards. Legitimate work (paging,
//! polling, retries after errors, long chains, parallel batches, counters, any mix of
//! them, new actions whose results are all the same, results that differ only in
//! numbers) never trips a guard and completes with
//! every result byte for byte as the tool returned it; loops (repeats, cycles of period
//! 2–4, growing or counting arguments, failing skills), after any legitimate prefix and
//! with any number of idle tools on offer, always end with an answer within the
//! termination bounds.

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{
    ChatEvent, CompletionRequest, Message, RepeatSemantics, StopReason, ToolCall, ToolOutcome,
};
use buddy_engine::{Engine, LoopPolicy, TurnOutcome, TurnRequest};
use buddy_testkit::{
    ReplyProvider, TestTool, TestToolbox, assert_event_order, assert_history_valid, reply_tokens,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::WORDS;

/// Cases per property; each runs a whole turn.
const CASES: u32 = 1000;

/// One stretch of legitimate work.
#[derive(Clone, Debug)]
enum Legit {
    /// Pages 1..=pages, one per round; `numbers_only`: results differ only in the number.
    Paging { pages: u8, numbers_only: bool },
    /// Start a job, then poll it with identical arguments: "running" `running` times, then done.
    Polling { running: u8, declared: bool },
    /// The same call fails `errors` times (1–2, under the circuit breaker), then succeeds.
    Retry { errors: u8, same_error: bool },
    /// Steps with distinct arguments and results.
    Chain { steps: u8 },
    /// One response with `size` calls of one tool; `echo_only`: results say nothing but the key.
    Batch { size: u8, echo_only: bool },
    /// The same call with no arguments, each result a new number (`{"n":0}`, `{"n":1}`…).
    Counter { times: u8 },
    /// A read names a ticket; a search that only echoes its query carries the ticket on.
    /// The tickets are all digits, so the queries look alike once digits are folded.
    TokenChain { steps: u8 },
    /// Write a fix (always "wrote 41 bytes"), run the tests (a new failure each time),
    /// until they pass.
    FixCycle { attempts: u8 },
    /// New actions whose arguments count up (`file 1`, `file 2`, …) and whose results are
    /// all the same: `ok`, empty, or an echo of the arguments. Each is a new action.
    Counting { steps: u8, result: u8 },
}

/// One way a model loops.
#[derive(Clone, Debug)]
enum Loop {
    /// The same call forever, its result the same.
    Repeat { semantics: u8 },
    /// Calls to `period` tools in turn, same arguments and results.
    Cycle { period: u8 },
    /// A query that grows word by word while the result adds nothing new.
    Growing { echo: bool },
    /// A skill that fails whatever the arguments.
    Failing { echo: bool },
    /// A poll whose answers differ only in a timestamp, a check counter and a request id.
    NoisyPoll,
    /// A status that flips between `states` values for ever.
    FlipFlop { states: u8 },
}

const KEYS: [&str; 12] = [
    "AAPL", "MSFT", "NVDA", "AMZN", "GOOG", "META", "TSLA", "ORCL", "INTC", "IBM", "CSCO", "ADBE",
];

fn legit() -> impl Strategy<Value = Legit> {
    prop_oneof![
        (1u8..=12, any::<bool>()).prop_map(|(pages, numbers_only)| Legit::Paging {
            pages,
            numbers_only
        }),
        (0u8..=3, any::<bool>())
            .prop_map(|(running, declared)| Legit::Polling { running, declared }),
        (1u8..=2, any::<bool>())
            .prop_map(|(errors, same_error)| Legit::Retry { errors, same_error }),
        (1u8..=40).prop_map(|steps| Legit::Chain { steps }),
        (2u8..=12, any::<bool>()).prop_map(|(size, echo_only)| Legit::Batch { size, echo_only }),
        (2u8..=6).prop_map(|times| Legit::Counter { times }),
        (1u8..=8).prop_map(|steps| Legit::TokenChain { steps }),
        (1u8..=5).prop_map(|attempts| Legit::FixCycle { attempts }),
        (1u8..=40, 0u8..3).prop_map(|(steps, result)| Legit::Counting { steps, result }),
    ]
}

fn a_loop() -> impl Strategy<Value = Loop> {
    prop_oneof![
        (0u8..3).prop_map(|semantics| Loop::Repeat { semantics }),
        (2u8..=4).prop_map(|period| Loop::Cycle { period }),
        any::<bool>().prop_map(|echo| Loop::Growing { echo }),
        any::<bool>().prop_map(|echo| Loop::Failing { echo }),
        Just(Loop::NoisyPoll),
        (2u8..=3).prop_map(|states| Loop::FlipFlop { states }),
    ]
}

/// The calls of each round, and the tools they need.
struct Script {
    rounds: Vec<Vec<(String, Value)>>,
    toolbox: TestToolbox,
}

fn arg_u64(call: &ToolCall, key: &str) -> u64 {
    serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .and_then(|v| v.get(key).and_then(Value::as_u64))
        .unwrap_or(0)
}

fn arg_str(call: &ToolCall, key: &str) -> String {
    serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .and_then(|v| v.get(key).and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default()
}

/// Adds one legitimate stretch (its tools named with suffix `s`) to the script.
fn add_legit(script: &mut Script, part: &Legit, s: usize) {
    let toolbox = std::mem::take(&mut script.toolbox);
    let rounds = &mut script.rounds;
    script.toolbox = match *part {
        Legit::Paging {
            pages,
            numbers_only,
        } => legit_paging(rounds, toolbox, s, pages, numbers_only),
        Legit::Polling { running, declared } => {
            legit_polling(rounds, toolbox, s, running, declared)
        }
        Legit::Retry { errors, same_error } => legit_retry(rounds, toolbox, s, errors, same_error),
        Legit::Chain { steps } => legit_chain(rounds, toolbox, s, steps),
        Legit::Batch { size, echo_only } => legit_batch(rounds, toolbox, s, size, echo_only),
        Legit::Counter { times } => legit_counter(rounds, toolbox, s, times),
        Legit::TokenChain { steps } => legit_token_chain(rounds, toolbox, s, steps),
        Legit::Counting { steps, result } => legit_counting(rounds, toolbox, s, steps, result),
        Legit::FixCycle { attempts } => legit_fix_cycle(rounds, toolbox, s, attempts),
    };
}

/// [`Legit::Paging`] in stretch `s`: its rounds added, its tools on `toolbox`.
fn legit_paging(
    rounds: &mut Vec<Vec<(String, Value)>>,
    toolbox: TestToolbox,
    s: usize,
    pages: u8,
    numbers_only: bool,
) -> TestToolbox {
    let name = format!("read_page_{s}");
    for page in 1..=u64::from(pages) {
        rounds.push(vec![(name.clone(), json!({"page": page}))]);
    }
    toolbox.with(
        &name,
        TestTool::new(move |call, _| {
            let page = arg_u64(call, "page");
            ToolOutcome::ok(if numbers_only {
                format!("content of page {page}")
            } else {
                format!(
                    "page {page}: the {} by the {}",
                    WORDS[page as usize % 16],
                    WORDS[(page as usize * 7) % 16]
                )
            })
        }),
    )
}

/// [`Legit::Polling`] in stretch `s`: its rounds added, its tools on `toolbox`.
fn legit_polling(
    rounds: &mut Vec<Vec<(String, Value)>>,
    toolbox: TestToolbox,
    s: usize,
    running: u8,
    declared: bool,
) -> TestToolbox {
    let (start, status) = (format!("start_job_{s}"), format!("job_status_{s}"));
    rounds.push(vec![(start.clone(), json!({"table": "sales"}))]);
    for _ in 0..=running {
        rounds.push(vec![(status.clone(), json!({"job_id": format!("j_{s}")}))]);
    }
    let poll = TestTool::new(move |_, n| {
        ToolOutcome::ok(if n <= usize::from(running) {
            "running".to_owned()
        } else {
            format!("done: exported {} rows", 48_000 + n)
        })
    });
    let poll = if declared {
        poll.semantics(RepeatSemantics::Pollable)
    } else {
        poll
    };
    toolbox
        .with(
            &start,
            TestTool::new(move |_, _| ToolOutcome::ok(format!("started job j_{s}"))),
        )
        .with(&status, poll)
}

/// [`Legit::Retry`] in stretch `s`: its rounds added, its tools on `toolbox`.
fn legit_retry(
    rounds: &mut Vec<Vec<(String, Value)>>,
    toolbox: TestToolbox,
    s: usize,
    errors: u8,
    same_error: bool,
) -> TestToolbox {
    let name = format!("fetch_{s}");
    for _ in 0..=errors {
        rounds.push(vec![(
            name.clone(),
            json!({"url": format!("https://example.com/{s}")}),
        )]);
    }
    toolbox.with(
        &name,
        TestTool::new(move |_, n| {
            if n <= usize::from(errors) {
                ToolOutcome::error(if same_error {
                    "timed out after 5 s".to_owned()
                } else {
                    format!("503 Service Unavailable (attempt {n})")
                })
            } else {
                ToolOutcome::ok(format!("report {s}: revenue up {n}%"))
            }
        }),
    )
}

/// [`Legit::Chain`] in stretch `s`: its rounds added, its tools on `toolbox`.
fn legit_chain(
    rounds: &mut Vec<Vec<(String, Value)>>,
    toolbox: TestToolbox,
    s: usize,
    steps: u8,
) -> TestToolbox {
    let names: Vec<String> = (0..3).map(|k| format!("step_{s}_{k}")).collect();
    for step in 0..u64::from(steps) {
        let name = names[(step % 3) as usize].clone();
        rounds.push(vec![(name, json!({"id": format!("item-{s}-{step}")}))]);
    }
    names.iter().fold(toolbox, |tb, name| {
        tb.with(
            name,
            TestTool::new(|call, n| {
                let id = arg_str(call, "id");
                ToolOutcome::ok(format!(
                    "{id} leads to {} and {}",
                    WORDS[n % 16],
                    WORDS[(n * 5 + 3) % 16]
                ))
            }),
        )
    })
}

/// [`Legit::Batch`] in stretch `s`: its rounds added, its tools on `toolbox`.
fn legit_batch(
    rounds: &mut Vec<Vec<(String, Value)>>,
    toolbox: TestToolbox,
    s: usize,
    size: u8,
    echo_only: bool,
) -> TestToolbox {
    let name = format!("lookup_{s}");
    rounds.push(
        KEYS.iter()
            .take(usize::from(size))
            .map(|key| (name.clone(), json!({"ticker": key})))
            .collect(),
    );
    toolbox.with(
        &name,
        TestTool::new(move |call, n| {
            let key = arg_str(call, "ticker");
            ToolOutcome::ok(if echo_only {
                format!("{key}: no trades today")
            } else {
                format!("{key}: {} trades today", n * 37)
            })
        }),
    )
}

/// [`Legit::Counter`] in stretch `s`: its rounds added, its tools on `toolbox`.
fn legit_counter(
    rounds: &mut Vec<Vec<(String, Value)>>,
    toolbox: TestToolbox,
    s: usize,
    times: u8,
) -> TestToolbox {
    let name = format!("next_ticket_{s}");
    for _ in 0..times {
        rounds.push(vec![(name.clone(), json!({}))]);
    }
    toolbox.with(
        &name,
        TestTool::new(|_, n| ToolOutcome::ok(format!("{{\"n\":{}}}", n - 1))),
    )
}

/// [`Legit::TokenChain`] in stretch `s`: its rounds added, its tools on `toolbox`.
fn legit_token_chain(
    rounds: &mut Vec<Vec<(String, Value)>>,
    toolbox: TestToolbox,
    s: usize,
    steps: u8,
) -> TestToolbox {
    let (read, search) = (format!("read_page_{s}"), format!("search_wiki_{s}"));
    for step in 1..=u64::from(steps) {
        rounds.push(vec![(
            read.clone(),
            json!({"url": format!("/checklist/{s}/{step}")}),
        )]);
        rounds.push(vec![(
            search.clone(),
            json!({"query": format!("step {step} after {}", ticket(s, step))}),
        )]);
    }
    toolbox
        .with(
            &read,
            TestTool::new(move |_, n| ToolOutcome::ok(ticket(s, n as u64))),
        )
        .with(
            &search,
            TestTool::new(|call, _| {
                ToolOutcome::ok(format!(
                    "Results for '{}': 1 page found.",
                    arg_str(call, "query")
                ))
            }),
        )
}

/// [`Legit::Counting`] in stretch `s`: its rounds added, its tools on `toolbox`.
fn legit_counting(
    rounds: &mut Vec<Vec<(String, Value)>>,
    toolbox: TestToolbox,
    s: usize,
    steps: u8,
    result: u8,
) -> TestToolbox {
    let name = format!("save_part_{s}");
    for step in 1..=u64::from(steps) {
        rounds.push(vec![(
            name.clone(),
            json!({"file": format!("part {step}.txt")}),
        )]);
    }
    toolbox.with(
        &name,
        TestTool::new(move |call, _| {
            ToolOutcome::ok(match result {
                0 => "ok".to_owned(),
                1 => String::new(),
                _ => format!("saved {}", arg_str(call, "file")),
            })
        }),
    )
}

/// [`Legit::FixCycle`] in stretch `s`: its rounds added, its tools on `toolbox`.
fn legit_fix_cycle(
    rounds: &mut Vec<Vec<(String, Value)>>,
    toolbox: TestToolbox,
    s: usize,
    attempts: u8,
) -> TestToolbox {
    let (save, test) = (format!("save_code_{s}"), format!("run_tests_{s}"));
    for attempt in 0..=u64::from(attempts) {
        rounds.push(vec![(
            save.clone(),
            json!({"path": "calc.py", "content": format!("def add(a, b):\n    return a + b * {attempt}\n")}),
        )]);
        rounds.push(vec![(test.clone(), json!({}))]);
    }
    let failures = usize::from(attempts);
    toolbox
        .with(
            &save,
            TestTool::new(|_, _| ToolOutcome::ok("wrote 41 bytes")),
        )
        .with(
            &test,
            TestTool::new(move |_, n| {
                if n <= failures {
                    ToolOutcome::error(format!(
                        "FAILED test_add: expected 3, got {}",
                        WORDS[n % 16]
                    ))
                } else {
                    ToolOutcome::ok("2 passed in 0.01s")
                }
            }),
        )
}

/// The ticket number the `n`-th page of stretch `s` names: eight digits, all different.
fn ticket(s: usize, n: u64) -> String {
    format!(
        "{:08}",
        (n * 7_919 + s as u64 * 104_729) % 100_000_000 + 10_000_000
    )
}

fn semantics(i: u8) -> RepeatSemantics {
    [
        RepeatSemantics::Observed,
        RepeatSemantics::Pure,
        RepeatSemantics::Effectful,
    ][usize::from(i % 3)]
}

/// Adds a loop that goes on forever (the model never stops on its own) and returns the
/// most model calls it may take, Finalize included.
fn add_loop(script: &mut Script, kind: &Loop) -> u32 {
    const FOREVER: u64 = 60;
    let toolbox = std::mem::take(&mut script.toolbox);
    let (toolbox, bound) = match *kind {
        Loop::Repeat { semantics: s } => {
            for _ in 0..FOREVER {
                script.rounds.push(vec![(
                    "search_web".to_owned(),
                    json!({"query": "rust borrow checker"}),
                )]);
            }
            let sem = semantics(s);
            let tool = TestTool::new(|_, _| {
                ToolOutcome::ok("Top result: the borrow checker enforces ownership.")
            })
            .semantics(sem);
            // A tool that declares nothing is judged by its results: the fifth identical
            // one in a row is warned, the eighth ends the turn (a job polled as "running"
            // seven times can finish), then Finalize.
            (
                toolbox.with("search_web", tool),
                if sem == RepeatSemantics::Observed {
                    9
                } else {
                    4
                },
            )
        }
        Loop::Cycle { period } => {
            let names: Vec<String> = (0..period).map(|k| format!("cycle_tool_{k}")).collect();
            for r in 0..FOREVER {
                let name = names[(r % u64::from(period)) as usize].clone();
                script.rounds.push(vec![(name, json!({"city": "Paris"}))]);
            }
            let tb = names.iter().fold(toolbox, |tb, name| {
                let said = format!("{name}: 14 degrees, light rain");
                tb.with(
                    name,
                    TestTool::new(move |_, _| ToolOutcome::ok(said.clone())),
                )
            });
            // Calls in turn with the same answers are also jobs polled in turn: each member
            // gets the patience of a job polled alone (its first look again comes after
            // something new, and counts nothing), so a member's fifth identical answer in
            // a row ends it: 5 rounds per member, then Finalize.
            (tb, 5 * u32::from(period) + 1)
        }
        Loop::Growing { echo } => {
            for r in 1..=FOREVER {
                let words: Vec<&str> = WORDS.iter().cycle().take(r as usize).copied().collect();
                let query = format!("libfoo changelog {}", words.join(" "));
                script
                    .rounds
                    .push(vec![("search_docs".to_owned(), json!({"query": query}))]);
            }
            let tool = TestTool::new(move |call, _| {
                ToolOutcome::ok(if echo {
                    format!("No results for '{}'.", arg_str(call, "query"))
                } else {
                    "No results found.".to_owned()
                })
            });
            // Each call is a new action, so slowly: the fifth arguments that barely varied
            // with the same answer earn a note, the sixth a withdrawal, a call to the
            // withdrawn tool Finalize.
            (toolbox.with("search_docs", tool), 8)
        }
        Loop::Failing { echo } => {
            for r in 1..=FOREVER {
                script.rounds.push(vec![(
                    "fetch_url".to_owned(),
                    json!({"url": format!("https://example.com/r?try={r}")}),
                )]);
            }
            let tool = TestTool::new(move |call, _| {
                ToolOutcome::error(if echo {
                    format!("connection refused: {}", arg_str(call, "url"))
                } else {
                    "connection refused".to_owned()
                })
            });
            (toolbox.with("fetch_url", tool), 6)
        }
        Loop::NoisyPoll => {
            for _ in 0..FOREVER {
                script.rounds.push(vec![(
                    "build_status".to_owned(),
                    json!({"build": "b-1042"}),
                )]);
            }
            let tool = TestTool::new(|_, n| {
                ToolOutcome::ok(format!(
                    "pending (checked at 2025-01-01T12:{:02}:{:02}Z, check {n}, request 3f2a{n:04x}-9d4e-4c1b-8a2f-0051c0ffee{:02x})",
                    n / 60 % 60,
                    n % 60,
                    n % 256
                ))
            });
            // Five looks with nothing new, as for any repeat of a tool that declares nothing.
            (toolbox.with("build_status", tool), 9)
        }
        Loop::FlipFlop { states } => {
            for _ in 0..FOREVER {
                script
                    .rounds
                    .push(vec![("job_state".to_owned(), json!({"job": "j-7"}))]);
            }
            let names = ["running", "queued", "retrying"];
            let count = usize::from(states);
            let tool = TestTool::new(move |_, n| ToolOutcome::ok(names[(n - 1) % count]));
            // Each state once, then answers with nothing new: a note at the fifth in a row,
            // the end at the eighth (termination v5: warn, then end).
            (toolbox.with("job_state", tool), 8 + u32::from(states))
        }
    };
    script.toolbox = toolbox;
    bound
}

/// Adds tools that are offered but never called.
fn add_idle(script: &mut Script, idle: u8) {
    let toolbox = std::mem::take(&mut script.toolbox);
    script.toolbox = (0..idle).fold(toolbox, |tb, k| {
        tb.with(
            &format!("idle_{k}"),
            TestTool::new(|_, _| ToolOutcome::ok("idle")),
        )
    });
}

const FINAL: &str = "Here is the final answer.";

/// Plays the script: round r's calls while tools are offered (and after them, the final
/// answer); asked to answer without tools, it answers.
fn model(rounds: Vec<Vec<(String, Value)>>) -> ReplyProvider {
    ReplyProvider::new(move |req: &CompletionRequest<'_>, i| {
        let round = req
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        match rounds.get(round) {
            Some(calls) if req.offers_tools() => {
                let calls = calls
                    .iter()
                    .enumerate()
                    .map(|(k, (name, args))| {
                        ToolCall::new(format!("c{i}_{k}"), name.clone(), args.to_string())
                    })
                    .collect();
                Ok(reply_tokens("", calls))
            }
            _ => Ok(reply_tokens(FINAL, vec![])),
        }
    })
}

fn run(script: Script, policy: LoopPolicy) -> (Vec<ChatEvent>, TurnOutcome) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let engine = Engine::new(Arc::new(model(script.rounds)), Arc::new(script.toolbox));
    let request = TurnRequest::new("behaviour-model", "do the work")
        .with_policy(policy)
        .with_clock(buddy_testkit::no_wait());
    let (events, outcome) = runtime
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(30), engine.run_collect(request)).await
        })
        .expect("the turn must terminate");
    assert_event_order(&events);
    assert_history_valid(&outcome.messages);
    // Replayed under its own policy, every generated turn does exactly what it did.
    let replayed = runtime
        .block_on(buddy_engine::replay(&outcome.recording(), None))
        .expect("the recording replays");
    assert!(
        replayed.same_stop && replayed.beyond.is_none(),
        "replay differs: {replayed:#?}"
    );
    (events, outcome)
}

fn guard_events(events: &[ChatEvent]) -> Vec<&ChatEvent> {
    events
        .iter()
        .filter(|e| matches!(e, ChatEvent::GuardTripped { .. }))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn legitimate_work_never_trips_a_guard(
        parts in prop::collection::vec(legit(), 1..=4),
        idle in 0u8..=6,
    ) {
        let mut script = Script { rounds: Vec::new(), toolbox: TestToolbox::new() };
        for (s, part) in parts.iter().enumerate() {
            add_legit(&mut script, part, s);
        }
        add_idle(&mut script, idle);
        let rounds = u32::try_from(script.rounds.len()).unwrap_or(u32::MAX);
        let calls: usize = script.rounds.iter().map(Vec::len).sum();
        // Limits out of the way: this is about the loop guards.
        let policy = LoopPolicy {
            max_model_calls: rounds + 2,
            max_tool_calls: u32::try_from(calls).unwrap_or(u32::MAX) + 1,
            ..LoopPolicy::default()
        };
        let (events, outcome) = run(script, policy);
        let guards = guard_events(&events);
        prop_assert!(guards.is_empty(), "{parts:?} tripped: {guards:?}");
        prop_assert_eq!(outcome.reason, StopReason::Completed, "{:?}", parts);
        prop_assert_eq!(outcome.stats.model_calls, rounds + 1, "{:?}", parts);
        prop_assert_eq!(outcome.answer.as_deref(), Some(FINAL));
        // Every result reached the model as the tool returned it: nothing appended.
        let results: Vec<&str> = outcome.messages.iter().filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        }).collect();
        prop_assert_eq!(results.len(), calls);
        prop_assert!(results.iter().all(|r| !r.contains("[system note")), "{results:?}");
    }

    #[test]
    fn loops_end_with_an_answer_within_their_bounds(
        prefix in prop::collection::vec(legit(), 0..=2),
        kind in a_loop(),
        idle in 0u8..=6,
    ) {
        let mut script = Script { rounds: Vec::new(), toolbox: TestToolbox::new() };
        for (s, part) in prefix.iter().enumerate() {
            add_legit(&mut script, part, s);
        }
        let before = u32::try_from(script.rounds.len()).unwrap_or(u32::MAX);
        let bound = before + add_loop(&mut script, &kind);
        add_idle(&mut script, idle);
        let policy = LoopPolicy {
            max_model_calls: 1000,
            max_tool_calls: 10_000,
            ..LoopPolicy::default()
        };
        let (events, outcome) = run(script, policy);
        prop_assert!(
            outcome.stats.model_calls <= bound,
            "{prefix:?} then {kind:?}: {} model calls > {bound}; guards {:?}",
            outcome.stats.model_calls,
            guard_events(&events)
        );
        prop_assert!(
            matches!(outcome.reason, StopReason::LoopDetected | StopReason::ToolsExhausted),
            "{:?}", outcome.reason
        );
        match events.last() {
            Some(ChatEvent::Done { answer, .. }) => prop_assert!(!answer.trim().is_empty()),
            other => prop_assert!(false, "no answer: {other:?}"),
        }
    }
}
