use std::sync::atomic::Ordering;
use std::time::Duration;

use buddy_core::{
    ChatEvent, FinishReason, GuardAction, GuardKind, Message, ProviderError, RepeatSemantics,
    StopReason, Token, ToolOutcome,
};
use buddy_engine::LoopPolicy;
use buddy_testkit::{RecordingProvider, ReplyProvider, TestTool, TestToolbox, reply_tokens};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{call, run_turn};

#[tokio::test]
async fn parallel_calls_run_concurrently_and_results_keep_call_order() {
    let toolbox = TestToolbox::new()
        .with(
            "a",
            TestTool::new(|_, _| ToolOutcome::ok("A")).delay(Duration::from_millis(150)),
        )
        .with(
            "b",
            TestTool::new(|_, _| ToolOutcome::ok("B")).delay(Duration::from_millis(10)),
        )
        .with(
            "c",
            TestTool::new(|_, _| ToolOutcome::ok("C")).delay(Duration::from_millis(60)),
        );
    let max_in_flight = toolbox.max_in_flight();
    let provider = ReplyProvider::new(|_, i| {
        Ok(if i == 0 {
            reply_tokens(
                "",
                vec![
                    call("1", "a", json!({})),
                    call("2", "b", json!({})),
                    call("3", "c", json!({})),
                ],
            )
        } else {
            reply_tokens("all three done", vec![])
        })
    });
    let (_, outcome) = run_turn(provider, toolbox, LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_eq!(
        max_in_flight.load(Ordering::SeqCst),
        3,
        "all three ran at once"
    );
    let results: Vec<(&str, &str)> = outcome
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => Some((tool_call_id.as_str(), content.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(results, vec![("1", "A"), ("2", "B"), ("3", "C")]);
}

#[tokio::test]
async fn max_parallel_tools_bounds_concurrency() {
    let toolbox = TestToolbox::new().with("a", TestTool::echo().delay(Duration::from_millis(20)));
    let max_in_flight = toolbox.max_in_flight();
    let provider = ReplyProvider::new(|_, i| {
        Ok(if i == 0 {
            reply_tokens(
                "",
                (0..4)
                    .map(|k| call(&k.to_string(), "a", json!({"k": k})))
                    .collect(),
            )
        } else {
            reply_tokens("ok", vec![])
        })
    });
    let policy = LoopPolicy {
        max_parallel_tools: 2,
        ..LoopPolicy::default()
    };
    run_turn(provider, toolbox, policy).await;
    assert_eq!(max_in_flight.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn finish_reason_is_recorded_not_trusted() {
    // Some servers send `stop` with tool calls: the calls still run by default.
    let provider = ReplyProvider::new(|_, i| {
        Ok(if i == 0 {
            vec![
                Ok(Token::Text {
                    text: "Checking.".into(),
                }),
                Ok(Token::ToolCall(call("1", "a", json!({})))),
                Ok(Token::Finish {
                    reason: FinishReason::Stop,
                    usage: None,
                }),
            ]
        } else {
            // Others send `tool_calls` with no calls at all: the text is final.
            vec![
                Ok(Token::Text {
                    text: "Final.".into(),
                }),
                Ok(Token::Finish {
                    reason: FinishReason::ToolCalls,
                    usage: None,
                }),
            ]
        })
    });
    let toolbox = TestToolbox::new().with("a", TestTool::echo());
    let executed = toolbox.executed();
    let (_, outcome) = run_turn(provider, toolbox, LoopPolicy::default()).await;
    assert_eq!(executed.load(Ordering::SeqCst), 1);
    assert_eq!(
        (outcome.reason, outcome.answer.as_deref()),
        (StopReason::Completed, Some("Final."))
    );
}

#[tokio::test]
async fn honor_stop_takes_stop_plus_calls_as_final() {
    let provider = ReplyProvider::new(|_, _| {
        Ok(vec![
            Ok(Token::Text {
                text: "The answer is 4.".into(),
            }),
            Ok(Token::ToolCall(call("1", "a", json!({})))),
            Ok(Token::Finish {
                reason: FinishReason::Stop,
                usage: None,
            }),
        ])
    });
    let toolbox = TestToolbox::new().with("a", TestTool::echo());
    let executed = toolbox.executed();
    let policy = LoopPolicy {
        honor_stop: true,
        ..LoopPolicy::default()
    };
    let (events, outcome) = run_turn(provider, toolbox, policy).await;
    assert_eq!(executed.load(Ordering::SeqCst), 0);
    assert_eq!(outcome.answer.as_deref(), Some("The answer is 4."));
    assert!(events.iter().any(|e| matches!(
        e,
        ChatEvent::GuardTripped {
            guard: GuardKind::HonorStop,
            ..
        }
    )));
}

#[tokio::test]
async fn a_truncated_answer_says_so() {
    let provider = ReplyProvider::new(|_, _| {
        Ok(vec![
            Ok(Token::Text { text: "{\"".into() }),
            Ok(Token::Finish {
                reason: FinishReason::Length,
                usage: None,
            }),
        ])
    });
    let (events, outcome) = run_turn(provider, TestToolbox::new(), LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::Truncated);
    // Asked to go on twice (each a model call), every piece is the answer.
    assert_eq!(outcome.stats.model_calls, 3);
    assert_eq!(outcome.answer.as_deref(), Some("{\"{\"{\""));
    assert_eq!(
        guards(&events),
        [(GuardKind::FinalAnswerCheck, GuardAction::AskedAgain); 2]
    );
}

/// A reply of `text` cut by the output token limit.
fn cut(text: &str) -> Vec<Result<Token, ProviderError>> {
    vec![
        Ok(Token::Text { text: text.into() }),
        Ok(Token::Finish {
            reason: FinishReason::Length,
            usage: None,
        }),
    ]
}

#[tokio::test]
async fn a_reply_cut_by_the_output_limit_is_asked_to_go_on_and_its_pieces_are_the_answer() {
    let provider = RecordingProvider::new(ReplyProvider::new(|req, i| {
        Ok(match i {
            0 => cut("The three causes are: 1. the cache, "),
            1 => {
                // The model sees what it wrote so far, then the request to go on.
                let last = req.messages.len();
                assert!(matches!(
                    &req.messages[last - 2],
                    Message::Assistant { content: Some(c), .. } if c.starts_with("The three causes")
                ));
                assert!(
                    matches!(&req.messages[last - 1], Message::Note { content } if content.contains("Continue it exactly where it stopped"))
                );
                cut("2. the pool, ")
            }
            _ => reply_tokens("3. the clock.", vec![]),
        })
    }));
    let (events, outcome) = run_turn(provider, TestToolbox::new(), LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_eq!(outcome.stats.model_calls, 3);
    let whole = "The three causes are: 1. the cache, 2. the pool, 3. the clock.";
    assert_eq!(outcome.answer.as_deref(), Some(whole));
    assert!(matches!(events.last(), Some(ChatEvent::Done { answer, .. }) if answer == whole));
    // The history holds each piece once, as the model wrote it.
    let pieces: Vec<&str> = outcome
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant {
                content: Some(c), ..
            } => Some(c.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        pieces,
        [
            "The three causes are: 1. the cache, ",
            "2. the pool, ",
            "3. the clock."
        ]
    );
    buddy_testkit::assert_history_valid(&outcome.messages);
}

#[tokio::test]
async fn continuations_are_a_policy_budget() {
    let provider = ReplyProvider::new(|_, _| Ok(cut("more ")));
    let policy = LoopPolicy {
        max_continuations: 0,
        ..LoopPolicy::default()
    };
    let (_, outcome) = run_turn(provider, TestToolbox::new(), policy).await;
    assert_eq!(outcome.reason, StopReason::Truncated);
    assert_eq!(outcome.stats.model_calls, 1);
    assert_eq!(outcome.answer.as_deref(), Some("more "));
}

#[tokio::test]
async fn a_plain_chat_sends_no_tools() {
    let provider =
        RecordingProvider::new(ReplyProvider::new(|_, _| Ok(reply_tokens("hi", vec![]))));
    let requests = provider.requests();
    let (_, outcome) = run_turn(provider, TestToolbox::new(), LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    let requests = requests.lock().unwrap();
    assert_eq!(
        (requests[0].tools.clone(), requests[0].tool_choice),
        (None, None)
    );
}

#[tokio::test]
async fn a_request_without_a_user_message_is_refused_before_sending() {
    let provider =
        RecordingProvider::new(ReplyProvider::new(|_, _| Ok(reply_tokens("hi", vec![]))));
    let requests = provider.requests();
    let engine = buddy_engine::Engine::new(
        std::sync::Arc::new(provider),
        std::sync::Arc::new(TestToolbox::new()),
    );
    let mut request = buddy_engine::TurnRequest::new("m", "unused");
    request.user_message = None;
    request.history = vec![Message::system("you are helpful")];
    let (events, outcome) = engine.run_collect(request).await;
    assert_eq!(outcome.reason, StopReason::InvalidRequest);
    assert!(
        matches!(events.last(), Some(ChatEvent::Error { message, .. }) if message.contains("no user message"))
    );
    assert!(
        requests.lock().unwrap().is_empty(),
        "nothing reached the provider"
    );
}

#[tokio::test]
async fn an_empty_finalize_reply_gets_buddys_own_answer_and_its_calls_are_ignored() {
    let provider = ReplyProvider::new(|req, i| {
        // Even without tools offered, this model keeps asking for `a` and never writes text.
        let _ = req;
        Ok(reply_tokens(
            "",
            vec![call(&format!("c{i}"), "a", json!({}))],
        ))
    });
    let toolbox =
        TestToolbox::new().with("a", TestTool::new(|_, _| ToolOutcome::ok("the value is 7")));
    let executed = toolbox.executed();
    let (events, outcome) = run_turn(provider, toolbox, LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::LoopDetected);
    // Undeclared: the fifth identical result is warned, and the eighth (a job may say
    // "running" seven times) is a certain loop.
    assert_eq!(executed.load(Ordering::SeqCst), 8);
    assert_eq!(outcome.stats.model_calls, 9);
    let answer = outcome.answer.unwrap();
    assert!(
        answer.contains("the value is 7") && answer.contains("loop_detected"),
        "{answer}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, ChatEvent::TextDelta { text } if text == &answer))
    );
}

#[tokio::test]
async fn a_pollable_skill_that_never_changes_is_stopped_after_its_patience() {
    let provider = ReplyProvider::new(|req, i| {
        Ok(if req.offers_tools() {
            reply_tokens(
                "",
                vec![call(&format!("c{i}"), "status", json!({"job": "j1"}))],
            )
        } else {
            reply_tokens("The job is still running; try later.", vec![])
        })
    });
    let toolbox = TestToolbox::new().with(
        "status",
        TestTool::new(|_, _| ToolOutcome::ok("running")).semantics(RepeatSemantics::Pollable),
    );
    let policy = LoopPolicy {
        poll_patience: 2,
        ..LoopPolicy::default()
    };
    let (_, outcome) = run_turn(provider, toolbox, policy).await;
    // 3 polls are patience, the 4th warns, the 5th withdraws the only tool, then Finalize.
    assert_eq!(outcome.reason, StopReason::LoopDetected);
    assert_eq!(outcome.stats.tool_calls, 5);
    assert_eq!(outcome.stats.model_calls, 6);
}

#[tokio::test]
async fn unknown_tools_and_failures_become_results_the_model_sees() {
    let provider = ReplyProvider::new(|_, i| {
        Ok(match i {
            0 => reply_tokens("", vec![call("1", "nope", json!({}))]),
            _ => reply_tokens("sorry", vec![]),
        })
    });
    let toolbox = TestToolbox::new().with("a", TestTool::echo());
    let (_, outcome) = run_turn(provider, toolbox, LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert!(outcome.messages.iter().any(|m| matches!(m, Message::Tool { is_error: true, content, .. } if content.contains("unknown tool"))));
}

#[tokio::test]
async fn a_provider_that_reuses_call_ids_still_yields_a_valid_history() {
    // Some servers number calls per reply ("call_0" every time).
    let provider = ReplyProvider::new(|_, i| {
        Ok(match i {
            0 => reply_tokens(
                "",
                vec![
                    call("call_0", "a", json!({"k": 1})),
                    call("call_0", "a", json!({"k": 2})),
                ],
            ),
            1 => reply_tokens("", vec![call("call_0", "a", json!({"k": 3}))]),
            _ => reply_tokens("done", vec![]),
        })
    });
    let tool = TestTool::new(|_, n| ToolOutcome::ok(format!("the {} is ready", super::WORDS[n])));
    let (events, outcome) = run_turn(
        provider,
        TestToolbox::new().with("a", tool),
        LoopPolicy::default(),
    )
    .await;
    assert_eq!(outcome.reason, StopReason::Completed);
    let ids: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::ToolCallStart { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, vec!["call_0", "call_0_2", "call_0_3"]);
}

#[tokio::test]
async fn a_call_sent_again_under_the_id_of_one_that_ran_runs_at_most_once() {
    // Round 1 starts a job; the model then sends the very same call (same id, same
    // arguments) again, as a replayed history would; then the same id with other
    // arguments (a server that numbers its calls), which is a new call.
    let provider = ReplyProvider::new(|_, i| {
        Ok(match i {
            0 => reply_tokens(
                "",
                vec![call("call_job", "start_job", json!({"job": "backup"}))],
            ),
            1 => reply_tokens(
                "",
                vec![call("call_job", "start_job", json!({ "job": "backup" }))],
            ),
            2 => reply_tokens(
                "",
                vec![call("call_job", "start_job", json!({"job": "report"}))],
            ),
            _ => reply_tokens("Both jobs are started.", vec![]),
        })
    });
    let toolbox = TestToolbox::new().with(
        "start_job",
        TestTool::new(|call, n| {
            ToolOutcome::ok(format!("started {} as process {n}", call.arguments))
        }),
    );
    let executed = toolbox.executed();
    let (events, outcome) = run_turn(provider, toolbox, LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_eq!(
        executed.load(Ordering::SeqCst),
        2,
        "backup once, report once"
    );
    let results: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::ToolCallResult {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect();
    // The same call under the same id is that call: it gets the result it got then.
    assert_eq!(results[1], results[0], "{results:?}");
    assert!(results[0].0.contains("backup"), "{results:?}");
    assert!(
        !results[2].1 && results[2].0.contains("report"),
        "{results:?}"
    );
    assert!(
        guards(&events).contains(&(GuardKind::Repetition, GuardAction::ReturnedEarlierResult)),
        "{:?}",
        guards(&events)
    );
}

#[tokio::test]
async fn every_trip_carries_the_calls_and_results_that_matched() {
    // A search whose growing query is all its result echoes.
    let provider = ReplyProvider::new(|req, i| {
        if !req.offers_tools() {
            return Ok(reply_tokens("Nothing was found.", vec![]));
        }
        let query = format!("weather{}", " today".repeat(i));
        Ok(reply_tokens(
            "",
            vec![call(&format!("c{i}"), "search", json!({ "query": query }))],
        ))
    });
    let toolbox = TestToolbox::new().with(
        "search",
        TestTool::new(|call, _| {
            let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
            ToolOutcome::ok(format!(
                "No results for '{}'.",
                args["query"].as_str().unwrap()
            ))
        }),
    );
    let (events, outcome) = run_turn(provider, toolbox, LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::LoopDetected);
    let trips: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::GuardTripped {
                guard, evidence, ..
            } => Some((*guard, evidence.clone())),
            _ => None,
        })
        .collect();
    let (_, evidence) = trips
        .iter()
        .find(|(g, _)| *g == GuardKind::NearDuplicate)
        .expect("a near-duplicate trip");
    assert_eq!(evidence.len(), 2, "the earlier call and this one");
    assert!(evidence[0].call_id < evidence[1].call_id);
    assert_ne!(evidence[0].arguments, evidence[1].arguments);
    for e in evidence {
        assert_eq!(e.name, "search");
        assert!(e.result.starts_with("No results for 'weather"), "{e:?}");
    }
    let (_, last) = trips
        .iter()
        .rev()
        .find(|(g, _)| *g != GuardKind::FinalAnswerCheck)
        .unwrap();
    assert!(
        !last.is_empty(),
        "the trip that ended the turn names its calls"
    );
    // The evidence is part of the event's JSON.
    let json = serde_json::to_value(
        events
            .iter()
            .find(|e| {
                matches!(
                    e,
                    ChatEvent::GuardTripped {
                        guard: GuardKind::NearDuplicate,
                        ..
                    }
                )
            })
            .unwrap(),
    )
    .unwrap();
    assert_eq!(json["evidence"][0]["name"], "search");
}

#[tokio::test]
async fn trips_on_different_skills_decay_after_progress_and_a_repeat_after_its_note_ends() {
    // Each skill is asked twice in a row, one skill after another: each second ask trips
    // (answered from the earlier result, with a note), but the first ask of the next skill
    // is real progress (a new action, a new result), so the trips do not add up to the
    // budget. The turn ends when a skill is asked again after its note (round 9).
    let provider = ReplyProvider::new(|req, i| {
        if !req.offers_tools() {
            return Ok(reply_tokens("Done with what I have.", vec![]));
        }
        let name = ["a", "b", "c", "d"][(i / 2) % 4];
        Ok(reply_tokens(
            "",
            vec![call(&format!("c{i}"), name, json!({"q": "same"}))],
        ))
    });
    let toolbox = ["a", "b", "c", "d"]
        .into_iter()
        .fold(TestToolbox::new(), |tb, name| {
            tb.with(
                name,
                TestTool::new(move |_, _| ToolOutcome::ok(format!("{name} says hello")))
                    .semantics(RepeatSemantics::Pure),
            )
        });
    let (events, outcome) = run_turn(provider, toolbox, LoopPolicy::default()).await;
    assert_eq!(outcome.reason, StopReason::LoopDetected);
    assert_eq!(
        outcome.stats.model_calls, 10,
        "four notes, then a repeat after its note, then Finalize"
    );
    let finalize = events
        .iter()
        .find_map(|e| match e {
            ChatEvent::GuardTripped {
                guard,
                action: buddy_core::GuardAction::Finalize,
                ..
            } => Some(*guard),
            _ => None,
        })
        .expect("a Finalize trip");
    assert_eq!(finalize, GuardKind::Repetition);
    let notes = guards(&events)
        .iter()
        .filter(|(_, a)| *a == GuardAction::ReturnedEarlierResult)
        .count();
    assert_eq!(notes, 4, "{:?}", guards(&events));
}

/// The guards named by the `guard_tripped` events of a turn.
fn guards(events: &[ChatEvent]) -> Vec<(GuardKind, GuardAction)> {
    events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::GuardTripped { guard, action, .. } => Some((*guard, *action)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_tool_call_written_as_text_warns_that_tools_may_be_ignored() {
    // What llama-cpp-python does without tool_choice: the model writes the call as text.
    for text in [
        "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>",
        "{\"name\": \"a\", \"arguments\": {\"city\": \"Paris\"}}",
        "functions.a({})",
    ] {
        let provider = ReplyProvider::new(move |_, _| Ok(reply_tokens(text, vec![])));
        let toolbox = TestToolbox::new().with("a", TestTool::echo());
        let (events, outcome) = run_turn(provider, toolbox, LoopPolicy::default()).await;
        let tripped = guards(&events);
        assert!(
            tripped.contains(&(GuardKind::ToolsIgnored, GuardAction::Warned)),
            "{text}: {tripped:?}"
        );
        let detail = events.iter().find_map(|e| match e {
            ChatEvent::GuardTripped {
                guard: GuardKind::ToolsIgnored,
                detail,
                ..
            } => Some(detail.clone()),
            _ => None,
        });
        assert!(detail.is_some_and(|d| d.contains("buddy doctor")));
        // A small model does this too, with a server that passes tools on: asked again
        // (twice, the default max_reasks), then buddy says it has no answer.
        let asked = tripped
            .iter()
            .filter(|t| **t == (GuardKind::FinalAnswerCheck, GuardAction::AskedAgain))
            .count();
        assert_eq!((asked, outcome.stats.model_calls), (2, 3), "{text}");
        assert_eq!(outcome.reason, StopReason::NoAnswer, "{text}");
    }
}

#[tokio::test]
async fn plain_answers_and_real_calls_draw_no_tools_ignored_warning() {
    // A plain answer while tools are offered is normal chat.
    let provider = ReplyProvider::new(|_, _| Ok(reply_tokens("Hello! How can I help?", vec![])));
    let toolbox = TestToolbox::new().with("a", TestTool::echo());
    let (events, _) = run_turn(provider, toolbox, LoopPolicy::default()).await;
    assert!(guards(&events).is_empty(), "{:?}", guards(&events));

    // Once the model has called a tool, the server evidently passes tools on.
    let provider = ReplyProvider::new(|_, i| {
        Ok(if i == 0 {
            reply_tokens("", vec![call("1", "a", json!({}))])
        } else {
            reply_tokens(
                "{\"name\": \"a\", \"arguments\": {}} was the call I made.",
                vec![],
            )
        })
    });
    let toolbox = TestToolbox::new().with("a", TestTool::echo());
    let (events, _) = run_turn(provider, toolbox, LoopPolicy::default()).await;
    assert!(
        !guards(&events)
            .iter()
            .any(|(g, _)| *g == GuardKind::ToolsIgnored),
        "{:?}",
        guards(&events)
    );
}
