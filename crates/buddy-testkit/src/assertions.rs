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
            Message::User { .. } | Message::System { .. } => {
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
