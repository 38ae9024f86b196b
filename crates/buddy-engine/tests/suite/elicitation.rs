//! A tool that asks the person mid-call (MCP elicitation) through its context: the
//! question reaches the turn's stream, the answer from its desk reaches the tool; an
//! unattended turn answers by policy; a timeout or a cancelled turn answers `cancel`.

use std::sync::Arc;
use std::time::Duration;

use buddy_core::{
    BoxFuture, ChatEvent, ElicitationAnswer, ElicitationRequest, RepeatSemantics, SkillContext,
    StopReason, ToolCall, ToolOutcome, ToolSpec, Toolbox,
};
use buddy_engine::{
    AnswerError, CancellationToken, ElicitationDesk, Engine, LoopPolicy, TurnRequest,
    UnattendedElicitation,
};
use buddy_testkit::{ReplyProvider, assert_event_order, assert_history_valid, reply_tokens};
use serde_json::json;

use super::call;

/// Bounds every test: a wait that never ends fails instead of hanging.
const BOUND: Duration = Duration::from_secs(30);

/// One tool, `ask`, that asks for a name and returns what came back.
struct AskingToolbox {
    specs: Vec<ToolSpec>,
}

impl AskingToolbox {
    fn new() -> Self {
        AskingToolbox {
            specs: vec![ToolSpec {
                name: "ask".to_owned(),
                description: "Asks the person for a name.".to_owned(),
                parameters: json!({"type": "object", "properties": {}}),
            }],
        }
    }
}

fn form() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {"name": {"type": "string", "title": "Name"}},
        "required": ["name"]
    })
}

impl Toolbox for AskingToolbox {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }
    fn semantics(&self, _name: &str) -> Option<RepeatSemantics> {
        Some(RepeatSemantics::Effectful)
    }
    fn invoke<'a>(&'a self, _call: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let Some(elicitor) = ctx.elicitor else {
                return ToolOutcome::error("no elicitor in the context");
            };
            let answer = elicitor
                .ask(ElicitationRequest {
                    server: "people".to_owned(),
                    message: "Who are you?".to_owned(),
                    schema: form(),
                    order: vec!["name".to_owned()],
                })
                .await;
            ToolOutcome::ok(serde_json::to_string(&answer).unwrap_or_default())
        })
    }
}

/// Calls `ask` once, then answers with the tool's result.
fn model() -> ReplyProvider {
    ReplyProvider::new(|req, _| {
        Ok(
            match req.messages.iter().rev().find_map(|m| match m {
                buddy_core::Message::Tool { content, .. } => Some(content.clone()),
                _ => None,
            }) {
                Some(result) => reply_tokens(&format!("The tool said {result}"), vec![]),
                None => reply_tokens("", vec![call("c1", "ask", json!({}))]),
            },
        )
    })
}

fn tool_result(events: &[ChatEvent]) -> String {
    events
        .iter()
        .find_map(|e| match e {
            ChatEvent::ToolCallResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Runs a turn with `desk`, handing each `elicitation_required` event to `respond`.
async fn attended(
    request: TurnRequest,
    desk: Arc<ElicitationDesk>,
    respond: impl Fn(&ElicitationDesk, &str),
) -> (Vec<ChatEvent>, buddy_engine::TurnOutcome) {
    let engine = Arc::new(Engine::new(
        Arc::new(model()),
        Arc::new(AskingToolbox::new()),
    ));
    let (mut rx, handle) = engine.spawn(request.with_elicitation(Arc::clone(&desk)));
    let mut events = Vec::new();
    tokio::time::timeout(BOUND, async {
        while let Some(event) = rx.recv().await {
            if let ChatEvent::ElicitationRequired { id, .. } = &event {
                respond(&desk, id);
            }
            events.push(event);
        }
    })
    .await
    .expect("the turn ends");
    let outcome = handle.await.expect("the turn task ends");
    assert_event_order(&events);
    assert_history_valid(&outcome.messages);
    (events, outcome)
}

#[tokio::test]
async fn an_answer_from_the_desk_reaches_the_tool_and_a_bad_one_is_refused() {
    let (events, outcome) = attended(
        TurnRequest::new("m", "go"),
        Arc::new(ElicitationDesk::new()),
        |desk, id| {
            let wrong = desk.answer(
                id,
                ElicitationAnswer::Accept {
                    content: json!({"name": 7}).as_object().cloned().unwrap_or_default(),
                },
            );
            assert!(
                matches!(&wrong, Err(AnswerError::Invalid(e)) if e.field == "name"),
                "{wrong:?}"
            );
            assert_eq!(desk.open_requests().len(), 1, "the form stays open");
            let right = ElicitationAnswer::Accept {
                content: json!({"name": "Ada"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            };
            assert_eq!(desk.answer(id, right.clone()), Ok(()));
            assert_eq!(
                desk.answer(id, right),
                Err(AnswerError::Answered(id.to_owned()))
            );
            assert_eq!(
                desk.answer("elicit_99", ElicitationAnswer::Decline),
                Err(AnswerError::Unknown("elicit_99".to_owned()))
            );
        },
    )
    .await;
    assert_eq!(outcome.reason, StopReason::Completed);
    let asked = events.iter().find_map(|e| match e {
        ChatEvent::ElicitationRequired {
            id,
            call_id,
            server,
            message,
            schema,
            order,
        } => Some((
            id.clone(),
            call_id.clone(),
            server.clone(),
            message.clone(),
            schema.clone(),
            order.clone(),
        )),
        _ => None,
    });
    assert_eq!(
        asked,
        Some((
            "elicit_1".to_owned(),
            "c1".to_owned(),
            "people".to_owned(),
            "Who are you?".to_owned(),
            form(),
            vec!["name".to_owned()]
        ))
    );
    assert!(events.contains(&ChatEvent::ElicitationResolved {
        id: "elicit_1".to_owned(),
        action: "accept".to_owned(),
        unattended: None,
    }));
    assert_eq!(
        tool_result(&events),
        r#"{"action":"accept","content":{"name":"Ada"}}"#
    );
}

#[tokio::test]
async fn a_declined_question_tells_the_tool_so() {
    let (events, _) = attended(
        TurnRequest::new("m", "go"),
        Arc::new(ElicitationDesk::new()),
        |desk, id| {
            assert_eq!(desk.answer(id, ElicitationAnswer::Decline), Ok(()));
        },
    )
    .await;
    assert_eq!(tool_result(&events), r#"{"action":"decline"}"#);
}

#[tokio::test]
async fn an_unattended_turn_declines_by_default_and_cancels_if_told() {
    for (unattended, expected) in [
        (None, r#"{"action":"decline"}"#),
        (
            Some(UnattendedElicitation::Cancel),
            r#"{"action":"cancel"}"#,
        ),
        // `defaults` accepts only a form its defaults fill: `name` has none.
        (
            Some(UnattendedElicitation::Defaults),
            r#"{"action":"decline"}"#,
        ),
    ] {
        let mut policy = LoopPolicy::default();
        if let Some(unattended) = unattended {
            policy.unattended_elicitation = unattended;
        }
        let engine = Engine::new(Arc::new(model()), Arc::new(AskingToolbox::new()));
        let (events, outcome) = engine
            .run_collect(TurnRequest::new("m", "go").with_policy(policy))
            .await;
        assert_eq!(outcome.reason, StopReason::Completed);
        assert_eq!(tool_result(&events), expected);
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, ChatEvent::ElicitationRequired { .. })),
            "nobody to show it to"
        );
        // The turn says what was asked, that nobody could answer, and which setting did.
        let said = events.iter().find_map(|e| match e {
            ChatEvent::ElicitationResolved {
                unattended: Some(what),
                action,
                ..
            } => Some((what.clone(), action.clone())),
            _ => None,
        });
        let (what, action) = said.expect("an elicitation_resolved saying so");
        let setting = unattended.map_or("decline", |u| match u {
            UnattendedElicitation::Cancel => "cancel",
            _ => "defaults",
        });
        assert_eq!(
            what,
            format!(
                "MCP server `people` asked the person \"Who are you?\" (fields: name), but nobody was \
                 there to answer (this turn runs unattended): buddy answered `{action}`, as the \
                 setting `unattended_elicitation = \"{setting}\"` says"
            )
        );
        assert!(expected.contains(&action), "{action} {expected}");
        // The model reads it too, in a note after the call's result.
        let note = outcome
            .messages
            .iter()
            .find_map(|m| match m {
                buddy_core::Message::Note { content } if content.contains("nobody was there") => {
                    Some(content.clone())
                }
                _ => None,
            })
            .expect("a note for the model");
        assert!(
            note.starts_with("[system note] While call `c1` ran, MCP server `people` asked"),
            "{note}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn nobody_answering_in_time_is_a_cancel() {
    let policy = LoopPolicy {
        elicitation_timeout_secs: 5,
        ..LoopPolicy::default()
    };
    let desk = Arc::new(ElicitationDesk::new());
    let (events, outcome) = attended(
        TurnRequest::new("m", "go").with_policy(policy),
        Arc::clone(&desk),
        |_, _| {},
    )
    .await;
    assert_eq!(outcome.reason, StopReason::Completed);
    assert_eq!(tool_result(&events), r#"{"action":"cancel"}"#);
    assert!(desk.open_requests().is_empty());
    assert_eq!(
        desk.answer("elicit_1", ElicitationAnswer::Decline),
        Err(AnswerError::Answered("elicit_1".to_owned())),
        "a late answer is told the question is gone"
    );
}

#[tokio::test]
async fn cancelling_the_turn_ends_the_wait() {
    let cancel = CancellationToken::new();
    let to_cancel = cancel.clone();
    let desk = Arc::new(ElicitationDesk::new());
    let (_, outcome) = attended(
        TurnRequest::new("m", "go").with_cancel(cancel),
        Arc::clone(&desk),
        move |desk, _| {
            assert_eq!(desk.open_requests().len(), 1);
            to_cancel.cancel();
        },
    )
    .await;
    assert_eq!(outcome.reason, StopReason::Cancelled);
    assert!(
        desk.open_requests().is_empty(),
        "the question is closed with its call"
    );
}
