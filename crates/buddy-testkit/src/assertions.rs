use std::collections::{HashMap, HashSet};

use buddy_core::{ChatEvent, Message};

/// Panics unless the history has a user message and every tool call has exactly one
/// result right after its assistant message, and every result has its call.
pub fn assert_history_valid(messages: &[Message]) {
    assert!(
        messages.iter().any(Message::is_user),
        "history has no user message: {messages:#?}"
    );
    let mut open: HashSet<&str> = HashSet::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for (i, message) in messages.iter().enumerate() {
        match message {
            Message::Assistant { tool_calls, .. } => {
                assert!(
                    open.is_empty(),
                    "message {i}: calls {open:?} have no results before the next assistant message"
                );
                for call in tool_calls {
                    assert!(
                        seen.insert(&call.id),
                        "message {i}: call id {} used twice",
                        call.id
                    );
                    open.insert(&call.id);
                }
            }
            Message::Tool { tool_call_id, .. } => {
                assert!(
                    open.remove(tool_call_id.as_str()),
                    "message {i}: result for {tool_call_id} has no open call"
                );
            }
            Message::User { .. } | Message::System { .. } | Message::Note { .. } => {
                assert!(
                    open.is_empty(),
                    "message {i}: calls {open:?} have no results before a user/system message"
                );
            }
        }
    }
    assert!(open.is_empty(), "calls {open:?} never got results");
}

/// Panics unless the events form a valid turn: exactly one terminal event, last;
/// every tool result follows the start of the same call, once; every started call
/// gets a result; model-call numbers count up from 1.
pub fn assert_event_order(events: &[ChatEvent]) {
    let terminals = events.iter().filter(|e| e.is_terminal()).count();
    assert_eq!(
        terminals, 1,
        "expected exactly one terminal event, got {terminals}: {events:#?}"
    );
    assert!(
        events.last().is_some_and(ChatEvent::is_terminal),
        "the terminal event is not last: {events:#?}"
    );
    let mut started: HashMap<&str, bool> = HashMap::new();
    let mut next_call = 1;
    for event in events {
        match event {
            ChatEvent::ToolCallStart { id, .. } => {
                assert!(
                    started.insert(id, false).is_none(),
                    "call {id} started twice"
                );
            }
            ChatEvent::ToolCallResult { id, .. } => {
                let done = started.get_mut(id.as_str());
                assert!(done.is_some(), "result for {id} before its start");
                if let Some(done) = done {
                    assert!(!*done, "call {id} got two results");
                    *done = true;
                }
            }
            ChatEvent::IterationStats { model_call, .. } => {
                assert_eq!(*model_call, next_call, "model calls out of order");
                next_call += 1;
            }
            _ => {}
        }
    }
    let unanswered: Vec<&&str> = started
        .iter()
        .filter(|(_, done)| !**done)
        .map(|(id, _)| id)
        .collect();
    assert!(
        unanswered.is_empty(),
        "calls without results: {unanswered:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use buddy_core::{StopReason, ToolCall, TurnStats};

    fn call(id: &str) -> Message {
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall::new(id, "t", "{}")],
        }
    }

    fn done() -> ChatEvent {
        ChatEvent::Done {
            reason: StopReason::Completed,
            answer: "a".into(),
            stats: TurnStats::default(),
        }
    }

    #[test]
    fn a_valid_history_passes() {
        assert_history_valid(&[
            Message::user("u"),
            call("1"),
            Message::tool_result("1", "r", false),
        ]);
    }

    #[test]
    #[should_panic(expected = "no open call")]
    fn an_orphan_result_is_caught() {
        assert_history_valid(&[Message::user("u"), Message::tool_result("1", "r", false)]);
    }

    #[test]
    #[should_panic(expected = "never got results")]
    fn a_call_without_result_is_caught() {
        assert_history_valid(&[Message::user("u"), call("1")]);
    }

    #[test]
    #[should_panic(expected = "no user message")]
    fn a_history_without_user_is_caught() {
        assert_history_valid(&[Message::system("s")]);
    }

    #[test]
    #[should_panic(expected = "exactly one terminal event")]
    fn two_terminal_events_are_caught() {
        assert_event_order(&[done(), done()]);
    }

    #[test]
    #[should_panic(expected = "before its start")]
    fn a_result_before_its_start_is_caught() {
        assert_event_order(&[
            ChatEvent::ToolCallResult {
                id: "1".into(),
                name: "t".into(),
                content: "r".into(),
                is_error: false,
            },
            done(),
        ]);
    }

    #[test]
    #[should_panic(expected = "calls without results")]
    fn a_start_without_result_is_caught() {
        assert_event_order(&[
            ChatEvent::ToolCallStart {
                id: "1".into(),
                name: "t".into(),
                arguments: "{}".into(),
            },
            done(),
        ]);
    }
}
