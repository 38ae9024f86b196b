//! Calls that wait for a person's approval: the pause, each decision, a second resume,
//! an unattended run, and continuing a capped turn with a fresh budget.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use buddy_core::{
    ChatEvent, CompletionRequest, GuardAction, GuardKind, Message, Provider, RepeatSemantics,
    StopReason, ToolOutcome,
};
use buddy_engine::{
    ApprovalMode, ApprovalRules, CallDecision, Decision, Engine, LoopPolicy, Resume, TurnOutcome,
    TurnRequest,
};
use buddy_testkit::{ReplyProvider, TestTool, TestToolbox, assert_history_valid, reply_tokens};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::call;

/// A toolbox with an effectful `write` and a pure `read`, each echoing its arguments.
fn tools() -> (Arc<TestToolbox>, Arc<AtomicUsize>) {
    let toolbox = TestToolbox::new()
        .with(
            "write",
            TestTool::new(|c, _| ToolOutcome::ok(format!("wrote {}", c.arguments)))
                .semantics(RepeatSemantics::Effectful),
        )
        .with(
            "read",
            TestTool::new(|c, _| ToolOutcome::ok(format!("read {}", c.arguments)))
                .semantics(RepeatSemantics::Pure),
        );
    let executed = toolbox.executed();
    (Arc::new(toolbox), executed)
}

/// The model: first a write beside a read, then an answer quoting the last tool result.
fn model() -> ReplyProvider {
    ReplyProvider::new(|request: &CompletionRequest<'_>, _| {
        let last = request.messages.iter().rev().find_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        });
        Ok(match last {
            None => reply_tokens(
                "I will save it.",
                vec![
                    call(
                        "w1",
                        "write",
                        json!({"path": "haiku.txt", "text": "old pond"}),
                    ),
                    call("r1", "read", json!({"path": "notes.txt"})),
                ],
            ),
            Some(result) => reply_tokens(&format!("Done: {result}"), vec![]),
        })
    })
}

async fn turn(
    provider: impl Provider + 'static,
    toolbox: &Arc<TestToolbox>,
    request: TurnRequest,
) -> (Vec<ChatEvent>, TurnOutcome) {
    let engine = Engine::new(Arc::new(provider), Arc::clone(toolbox) as _);
    engine.run_collect(request).await
}

/// A turn paused for approval of `w1`.
async fn paused(toolbox: &Arc<TestToolbox>) -> TurnOutcome {
    let request = TurnRequest::new("m", "write a haiku to haiku.txt")
        .with_approval(ApprovalRules::destructive());
    let (events, outcome) = turn(model(), toolbox, request).await;
    assert_eq!(outcome.reason, StopReason::ApprovalRequired);
    let waiting: Vec<&ChatEvent> = events
        .iter()
        .filter(|e| matches!(e, ChatEvent::ApprovalRequired { .. }))
        .collect();
    let [ChatEvent::ApprovalRequired { calls }] = waiting.as_slice() else {
        panic!("one approval_required event, got {events:?}");
    };
    assert_eq!(
        calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["write"],
        "the pure read needs no approval"
    );
    assert!(calls[0].why.contains("effectful"), "{}", calls[0].why);
    assert!(matches!(
        events.last(),
        Some(ChatEvent::Done {
            reason: StopReason::ApprovalRequired,
            ..
        })
    ));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ChatEvent::ToolCallResult { .. }))
    );
    outcome
}

fn resume(outcome: &TurnOutcome, decisions: Vec<CallDecision>) -> TurnRequest {
    TurnRequest::resume("m", outcome.messages.clone(), Resume::Decisions(decisions))
        .with_approval(ApprovalRules::destructive())
}

fn decide(id: &str, decision: Decision) -> CallDecision {
    CallDecision {
        call_id: id.into(),
        decision,
    }
}

fn result_of<'a>(messages: &'a [Message], id: &str) -> Option<(&'a str, bool)> {
    messages.iter().find_map(|m| match m {
        Message::Tool {
            tool_call_id,
            content,
            is_error,
        } if tool_call_id == id => Some((content.as_str(), *is_error)),
        _ => None,
    })
}

#[tokio::test]
async fn a_paused_turn_runs_nothing_and_ends_with_the_open_call_message() {
    let (toolbox, executed) = tools();
    let outcome = paused(&toolbox).await;
    assert_eq!(executed.load(Ordering::SeqCst), 0, "nothing ran");
    let Some(Message::Assistant { tool_calls, .. }) = outcome.messages.last() else {
        panic!("the pause is the open call message");
    };
    assert_eq!(tool_calls.len(), 2);
    assert_eq!(outcome.stats.model_calls, 1);
}

#[tokio::test]
async fn approve_runs_the_calls_once_and_a_second_resume_is_refused() {
    let (toolbox, executed) = tools();
    let outcome = paused(&toolbox).await;
    let (events, resumed) = turn(
        model(),
        &toolbox,
        resume(&outcome, vec![decide("w1", Decision::Approve)]),
    )
    .await;
    assert_eq!(resumed.reason, StopReason::Completed, "{events:?}");
    assert_history_valid(&resumed.messages);
    assert_eq!(executed.load(Ordering::SeqCst), 2, "the write and the read");
    assert_eq!(
        result_of(&resumed.messages, "w1"),
        Some((r#"wrote {"path":"haiku.txt","text":"old pond"}"#, false))
    );
    assert_eq!(resumed.stats.model_calls, 2, "the paused call counts");
    assert_eq!(resumed.stats.tool_calls, 2);

    // The same decision again, on the conversation as it now is: nothing waits.
    let (events, again) = turn(
        model(),
        &toolbox,
        resume(&resumed, vec![decide("w1", Decision::Approve)]),
    )
    .await;
    assert_eq!(again.reason, StopReason::InvalidRequest);
    let Some(ChatEvent::Error { message, .. }) = events.last() else {
        panic!("an error, got {events:?}");
    };
    assert!(message.contains("nothing is waiting"), "{message}");
    assert_eq!(executed.load(Ordering::SeqCst), 2, "ran once");
}

#[tokio::test]
async fn reject_gives_the_model_the_reason_and_runs_only_the_rest() {
    let (toolbox, executed) = tools();
    let outcome = paused(&toolbox).await;
    let seen = Arc::new(std::sync::Mutex::new(String::new()));
    let seen_by_model = Arc::clone(&seen);
    let provider = ReplyProvider::new(move |request: &CompletionRequest<'_>, _| {
        if let Ok(mut s) = seen_by_model.lock() {
            *s = serde_json::to_string(request.messages).unwrap_or_default();
        }
        Ok(reply_tokens("Here is the haiku instead: old pond", vec![]))
    });
    let decisions = vec![decide(
        "w1",
        Decision::Reject {
            reason: Some("just show it to me".into()),
        },
    )];
    let (_, resumed) = turn(provider, &toolbox, resume(&outcome, decisions)).await;
    assert_eq!(resumed.reason, StopReason::Completed);
    assert_eq!(executed.load(Ordering::SeqCst), 1, "only the read ran");
    assert_eq!(
        result_of(&resumed.messages, "w1"),
        Some((
            "not run: the user rejected this call: just show it to me",
            true
        ))
    );
    assert!(seen.lock().unwrap().contains("just show it to me"));
}

#[tokio::test]
async fn edit_runs_the_call_with_the_new_arguments_and_tells_the_model() {
    let (toolbox, executed) = tools();
    let outcome = paused(&toolbox).await;
    let decisions = vec![decide(
        "w1",
        Decision::Edit {
            arguments: json!({"path": "poems/haiku.txt", "text": "old pond"}),
        },
    )];
    let (events, resumed) = turn(model(), &toolbox, resume(&outcome, decisions)).await;
    assert_eq!(resumed.reason, StopReason::Completed);
    assert_eq!(executed.load(Ordering::SeqCst), 2);
    assert_eq!(
        result_of(&resumed.messages, "w1"),
        Some((
            r#"wrote {"path":"poems/haiku.txt","text":"old pond"}"#,
            false
        ))
    );
    assert!(events.iter().any(|e| matches!(e,
        ChatEvent::ToolCallStart { id, arguments, .. } if id == "w1" && arguments.contains("poems/"))));
    assert!(resumed.messages.iter().any(|m| matches!(m,
        Message::Note { content } if content.contains("changed the arguments") && content.contains("poems/haiku.txt"))));
}

#[tokio::test]
async fn a_resume_must_decide_every_waiting_call_and_only_those() {
    let (toolbox, executed) = tools();
    let outcome = paused(&toolbox).await;
    for (decisions, expected) in [
        (vec![], "`w1` (`write`) needs a decision"),
        (
            vec![
                decide("w1", Decision::Approve),
                decide("zz", Decision::Approve),
            ],
            "call `zz` is not waiting",
        ),
        (
            vec![
                decide("w1", Decision::Approve),
                decide("w1", Decision::Approve),
            ],
            "two decisions",
        ),
        (
            vec![decide(
                "w1",
                Decision::Edit {
                    arguments: json!("x"),
                },
            )],
            "must be a JSON object",
        ),
    ] {
        let (events, resumed) = turn(model(), &toolbox, resume(&outcome, decisions)).await;
        assert_eq!(resumed.reason, StopReason::InvalidRequest);
        let Some(ChatEvent::Error { message, .. }) = events.last() else {
            panic!("an error");
        };
        assert!(message.contains(expected), "{message}");
    }
    assert_eq!(executed.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_unattended_turn_refuses_the_call_and_still_answers() {
    let (toolbox, executed) = tools();
    let rules = ApprovalRules {
        unattended: true,
        ..ApprovalRules::destructive()
    };
    let request = TurnRequest::new("m", "write a haiku").with_approval(rules);
    let (events, outcome) = turn(model(), &toolbox, request).await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_history_valid(&outcome.messages);
    assert_eq!(executed.load(Ordering::SeqCst), 1, "only the read ran");
    let (content, is_error) = result_of(&outcome.messages, "w1").unwrap();
    assert!(is_error && content.contains("needs a person's approval"));
    assert!(events.iter().any(|e| matches!(e,
        ChatEvent::GuardTripped { guard: GuardKind::Approval, action: GuardAction::Refused, skill: Some(s), detail, .. }
            if s == "write" && detail.contains("--approval never"))));
}

#[tokio::test]
async fn per_skill_modes_beat_the_default() {
    let (toolbox, executed) = tools();
    let rules = ApprovalRules {
        mode: ApprovalMode::Always,
        skills: [("write".to_owned(), ApprovalMode::Never)].into(),
        unattended: false,
    };
    let request = TurnRequest::new("m", "write").with_approval(rules);
    let (events, outcome) = turn(model(), &toolbox, request).await;
    assert_eq!(outcome.reason, StopReason::ApprovalRequired);
    let Some(ChatEvent::ApprovalRequired { calls }) = events
        .iter()
        .find(|e| matches!(e, ChatEvent::ApprovalRequired { .. }))
    else {
        panic!("paused");
    };
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "read");
    assert_eq!(executed.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_capped_turn_continues_with_a_fresh_budget_without_repeating_calls() {
    let (toolbox, executed) = tools();
    // Reads page 1, 2, 3, … until it has five results; a continued turn re-asks for page
    // 1 first (answered from memory, not run again) and then goes on.
    let provider = || {
        ReplyProvider::new(|request: &CompletionRequest<'_>, _| {
            let read: Vec<&str> = request
                .messages
                .iter()
                .filter_map(|m| match m {
                    Message::Tool { content, .. } => Some(content.as_str()),
                    _ => None,
                })
                .collect();
            let continued = request
                .messages
                .iter()
                .any(|m| matches!(m, Message::Note { content } if content.contains("more budget")));
            let page = read.len() + 1;
            Ok(if read.len() >= 5 {
                reply_tokens(&format!("Read {} pages.", read.len()), vec![])
            } else if continued && read.len() == 2 {
                reply_tokens("", vec![call("again", "read", json!({"page": 1}))])
            } else {
                reply_tokens(
                    "",
                    vec![call(&format!("p{page}"), "read", json!({"page": page}))],
                )
            })
        })
    };
    let capped_policy = LoopPolicy {
        max_model_calls: 3,
        ..LoopPolicy::default()
    };
    let request = TurnRequest::new("m", "read the pages").with_policy(capped_policy);
    let (_, capped) = turn(provider(), &toolbox, request).await;
    assert_eq!(capped.reason, StopReason::MaxModelCalls);
    assert!(capped.reason.is_capped());
    assert_eq!(executed.load(Ordering::SeqCst), 2);

    let request = TurnRequest::resume("m", capped.messages.clone(), Resume::Continue).with_policy(
        LoopPolicy {
            max_model_calls: 8,
            ..LoopPolicy::default()
        },
    );
    let (events, resumed) = turn(provider(), &toolbox, request).await;
    assert_eq!(resumed.reason, StopReason::Completed, "{events:?}");
    assert_history_valid(&resumed.messages);
    assert_eq!(
        executed.load(Ordering::SeqCst),
        4,
        "pages 3 and 4 ran; page 1 again was answered from the earlier result"
    );
    assert!(events.iter().any(|e| matches!(
        e,
        ChatEvent::GuardTripped {
            action: GuardAction::ReturnedEarlierResult,
            ..
        }
    )));
    assert_eq!(
        resumed.stats.model_calls, 4,
        "the budget counts from the continue"
    );
    assert_eq!(resumed.answer.as_deref(), Some("Read 5 pages."));
}
