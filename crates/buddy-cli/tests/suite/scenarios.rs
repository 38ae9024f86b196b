use std::sync::Arc;

use buddy_cli::toolbox::build_registry;
use buddy_core::{ChatEvent, GuardAction, GuardKind, StopReason};
use buddy_engine::{Engine, TurnRequest};
use buddy_scripted::ScriptedProvider;
use buddy_scripted::bench_loops::{LEGITIMATE, LOOP_BOUNDS, WARNED_THEN_COMPLETED};
use buddy_scripted::run::scenario_policy;
use buddy_skills::Sandbox;
use buddy_testkit::{RecordingProvider, assert_event_order, assert_history_valid};

use super::{load, run_all};

#[tokio::test]
async fn every_scenario_meets_its_expected_outcome_exactly() {
    let reports = run_all().await;
    assert!(
        reports.len() >= 15,
        "scenarios/ should hold every scenario of docs/design.md"
    );
    for (_, report) in &reports {
        assert!(report.passed(), "{}: {:?}", report.name, report.mismatches);
        assert_event_order(&report.events);
        assert_history_valid(&report.messages);
    }
}

#[tokio::test]
async fn loop_scenarios_end_with_an_answer_within_their_bounds() {
    let reports = run_all().await;
    for (name, bound) in LOOP_BOUNDS {
        let (scenario, report) = reports.iter().find(|(s, _)| s.name == name).expect(name);
        if name != "answer_plus_call_threshold" {
            assert!(
                scenario.policy.is_empty(),
                "{name} must run under the default policy"
            );
        }
        assert!(
            report.stats.model_calls <= bound,
            "{name}: {} model calls > {bound}",
            report.stats.model_calls
        );
        match report.events.last() {
            Some(ChatEvent::Done { answer, .. }) => {
                assert!(!answer.trim().is_empty(), "{name}: empty answer")
            }
            other => panic!("{name} must end with an answer, not {other:?}"),
        }
        if let Some(wanted) = &scenario.expect.answer_contains {
            assert!(
                report.answer.contains(wanted.as_str()),
                "{name}: the answer lacks `{wanted}`"
            );
        }
    }
}

#[tokio::test]
async fn legitimate_work_completes_untouched_under_the_default_policy() {
    let reports = run_all().await;
    for name in LEGITIMATE {
        let (scenario, report) = reports.iter().find(|(s, _)| s.name == name).expect(name);
        // The default guards; a smaller call budget is allowed (the budget note's scenario
        // needs to pass half of one).
        assert!(
            scenario
                .policy
                .fields()
                .all(|(k, _)| k == "max_model_calls"),
            "{name} must run under the default guards"
        );
        assert_eq!(report.reason, StopReason::Completed, "{name}");
        let guards: Vec<&ChatEvent> = report
            .events
            .iter()
            .filter(|e| matches!(e, ChatEvent::GuardTripped { .. }))
            .collect();
        assert!(
            guards.is_empty(),
            "{name} was touched by a guard: {guards:?}"
        );
        // A failing test is the tool's own result; a call buddy did not run is a guard's.
        let refused = report
            .events
            .iter()
            .filter(|e| {
                matches!(e, ChatEvent::ToolCallResult { is_error: true, content, .. }
                if content.starts_with("not run") || content.starts_with("not finished"))
            })
            .count();
        assert_eq!(refused, 0, "{name} had calls buddy did not run");
        assert_eq!(
            Some(report.stats.model_calls),
            scenario.expect.ideal_model_calls,
            "{name} wasted calls"
        );
    }
}

#[tokio::test]
async fn work_that_is_warned_then_changes_course_or_finishes_completes() {
    let reports = run_all().await;
    for name in WARNED_THEN_COMPLETED {
        let (scenario, report) = reports.iter().find(|(s, _)| s.name == name).expect(name);
        assert!(
            scenario.policy.is_empty(),
            "{name} must run under the default policy"
        );
        assert_eq!(report.reason, StopReason::Completed, "{name}");
        let guards: Vec<(GuardKind, GuardAction)> = report
            .events
            .iter()
            .filter_map(|e| match e {
                ChatEvent::GuardTripped { guard, action, .. } => Some((*guard, *action)),
                _ => None,
            })
            .collect();
        assert_eq!(guards.len(), 1, "{name}: one warning, {guards:?}");
        assert!(
            guards
                .iter()
                .all(|(_, action)| *action == GuardAction::Warned),
            "{name}: only warned, {guards:?}"
        );
        // The warning reached the model as a note of its own, with what to do instead.
        assert!(
            report
                .messages
                .iter()
                .any(|m| matches!(m, buddy_core::Message::Note { content }
                if content.contains("try something else"))),
            "{name}: no note"
        );
    }
    // The growing-file edit is a loop behind a changing number: warned, then ended.
    let (_, report) = reports
        .iter()
        .find(|(s, _)| s.name == "growing_file_edit")
        .expect("growing_file_edit");
    assert_eq!(report.reason, StopReason::LoopDetected);
    let actions: Vec<GuardAction> = report
        .events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::GuardTripped { action, .. } => Some(*action),
            _ => None,
        })
        .collect();
    assert_eq!(
        actions[..2],
        [GuardAction::Warned, GuardAction::Finalize],
        "{actions:?}"
    );
}

#[tokio::test]
async fn on_limit_error_ends_a_runaway_with_an_error_event() {
    let reports = run_all().await;
    let (_, report) = reports
        .iter()
        .find(|(s, _)| s.name == "runaway_on_limit_error")
        .unwrap();
    assert_eq!(report.stats.model_calls, 10);
    assert!(matches!(
        report.events.last(),
        Some(ChatEvent::Error {
            reason: StopReason::MaxModelCalls,
            ..
        })
    ));
}

#[tokio::test]
async fn a_plain_chat_request_carries_no_tools_and_finalize_withdraws_them() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(dir.path()).unwrap();
    for (name, finalize_expected) in [("plain_chat", false), ("get_time_forever", true)] {
        let scenario = load(name);
        let policy = scenario_policy(&scenario, &[]).unwrap();
        let registry = build_registry(&Default::default(), &sandbox, Some(&scenario)).unwrap();
        let provider = RecordingProvider::new(ScriptedProvider::new(Arc::new(scenario.clone())));
        let requests = provider.requests();
        let engine = Engine::new(Arc::new(provider), Arc::new(registry));
        let (_, outcome) = engine
            .run_collect(TurnRequest::new("m", scenario.prompt.clone()).with_policy(policy))
            .await;
        let requests = requests.lock().unwrap();
        let last = requests.last().unwrap();
        if finalize_expected {
            assert_eq!(
                last.tool_choice,
                Some(buddy_core::ToolChoice::None),
                "Finalize makes tools uncallable"
            );
            assert!(
                requests[0]
                    .tools
                    .as_ref()
                    .is_some_and(|t| t == &["get_time"])
            );
            assert_eq!(outcome.reason, StopReason::LoopDetected);
        } else {
            assert_eq!(requests.len(), 1);
            assert_eq!(
                (&last.tools, &last.tool_choice),
                (&None, &None),
                "a plain chat is exactly a plain chat: no tools, no tool_choice"
            );
            assert_eq!(outcome.reason, StopReason::Completed);
        }
    }
}

#[tokio::test]
async fn with_a_small_window_the_user_message_is_never_trimmed_away() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(dir.path()).unwrap();
    let scenario = load("lost_user_message");
    let policy = scenario_policy(&scenario, &[]).unwrap();
    assert_eq!(
        policy.context_window,
        Some(4096),
        "the scenario runs with a small window"
    );
    let registry = build_registry(&Default::default(), &sandbox, Some(&scenario)).unwrap();
    let provider = RecordingProvider::new(ScriptedProvider::new(Arc::new(scenario.clone())));
    let requests = provider.requests();
    let engine = Engine::new(Arc::new(provider), Arc::new(registry));
    let history = scenario
        .system
        .iter()
        .map(buddy_core::Message::system)
        .collect();
    let request = TurnRequest::new("scripted:lost_user_message", scenario.prompt.clone())
        .with_history(history)
        .with_policy(policy);
    let (events, outcome) = engine.run_collect(request).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert!(outcome.answer.unwrap().contains("six parts"));
    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), 7);
    for (n, request) in requests.iter().enumerate() {
        assert!(
            request
                .messages
                .iter()
                .any(|m| m == &buddy_core::Message::user(scenario.prompt.clone())),
            "request {n} lost the user message"
        );
        assert_eq!(
            request.messages[0],
            buddy_core::Message::system("You are a careful analyst.")
        );
    }
    assert!(
        requests.iter().any(|r| r
            .messages
            .iter()
            .any(|m| m.text().is_some_and(|t| t.contains("were left out")))),
        "old groups were dropped, with a note"
    );
    let called: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::ToolCallStart { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        !called.contains(&"get_workspace_rules"),
        "the model never restarted its session"
    );
    // The history itself keeps everything: trimming only shapes the requests.
    let results = outcome
        .messages
        .iter()
        .filter(|m| matches!(m, buddy_core::Message::Tool { .. }))
        .count();
    assert_eq!(results, 6);
}

#[tokio::test(flavor = "multi_thread")]
async fn over_http_every_scenario_meets_its_loop_efficiency_target() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(dir.path()).unwrap();
    let scenarios: Vec<_> = buddy_scripted::library::scenario_files(&super::scenarios_dir())
        .unwrap()
        .iter()
        .map(|f| buddy_scripted::Scenario::load(f).unwrap())
        .collect();
    let reports = buddy_scripted::bench_loops::run_loops(scenarios, &sandbox)
        .await
        .unwrap();
    assert!(reports.len() >= 17);
    for r in &reports {
        assert!(r.meets_target, "{r:?}");
        assert_eq!(
            r.requests_seen_by_mock, r.model_calls as usize,
            "{}: the mock saw every call",
            r.scenario
        );
    }
    for (name, bound) in LOOP_BOUNDS {
        let r = reports.iter().find(|r| r.scenario == name).expect(name);
        assert!(r.model_calls <= bound && r.answered, "{r:?}");
    }
    for name in LEGITIMATE {
        let r = reports.iter().find(|r| r.scenario == name).expect(name);
        assert!(
            r.guard_events == 0 && r.wasted == Some(0) && r.stop_reason == StopReason::Completed,
            "{r:?}"
        );
    }
}

/// Every tool result reaches the model byte for byte, whether buddy's budget and guard
/// notes are on or off: the notes travel in messages of their own.
#[tokio::test]
async fn tool_result_bytes_are_identical_with_notes_on_and_off() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(dir.path()).unwrap();
    let mut runs = Vec::new();
    for show_budget in [true, false] {
        let scenario = load("budget_note_chain");
        let mut policy = scenario_policy(&scenario, &[]).unwrap();
        policy.show_budget = show_budget;
        let registry = build_registry(&Default::default(), &sandbox, Some(&scenario)).unwrap();
        let provider = RecordingProvider::new(ScriptedProvider::new(Arc::new(scenario.clone())));
        let requests = provider.requests();
        let engine = Engine::new(Arc::new(provider), Arc::new(registry));
        let (_, outcome) = engine
            .run_collect(TurnRequest::new("m", scenario.prompt.clone()).with_policy(policy))
            .await;
        assert_eq!(outcome.reason, StopReason::Completed);
        let requests = requests.lock().unwrap();
        let last = requests.last().unwrap();
        let results: Vec<String> = last
            .messages
            .iter()
            .filter_map(|m| match m {
                buddy_core::Message::Tool { content, .. } => Some(content.clone()),
                _ => None,
            })
            .collect();
        let notes = last
            .messages
            .iter()
            .filter(|m| matches!(m, buddy_core::Message::Note { content } if content.contains("model calls left")))
            .count();
        runs.push((results, notes, outcome.answer.unwrap_or_default()));
    }
    let (on, off) = (&runs[0], &runs[1]);
    assert!(
        on.1 >= 5,
        "the budget note was shown from half the budget on"
    );
    assert_eq!(off.1, 0, "no budget note when show_budget is off");
    assert_eq!(on.0.len(), 20);
    assert_eq!(
        on.0, off.0,
        "tool result bytes differ with notes on and off"
    );
    for (i, result) in on.0.iter().enumerate() {
        let step = i + 1;
        assert_eq!(result, &format!("step {step} ok; checksum c{step}x{step}"));
    }
    assert_eq!(
        on.2, off.2,
        "the model saw the same results, so it answered the same"
    );
}
