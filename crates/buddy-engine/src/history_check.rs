//! The single validation step every request passes before it reaches a provider.

use std::collections::HashSet;

use buddy_core::Message;

/// A history no provider should ever receive: refused loudly, never sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    #[error(
        "the request has no user message; refusing to send it (this is a bug in buddy or its caller)"
    )]
    NoUserMessage,
    #[error("tool result for call `{0}` has no matching tool call before it")]
    OrphanResult(String),
    #[error("tool call `{0}` has no result before the next model call")]
    MissingResult(String),
    #[error("tool call id `{0}` is used twice")]
    DuplicateCallId(String),
}

/// Checks that `messages` has a user message and that every tool call and tool result
/// is paired, with the results right after their assistant message.
pub fn check_history(messages: &[Message]) -> Result<(), HistoryError> {
    if !messages.iter().any(Message::is_user) {
        return Err(HistoryError::NoUserMessage);
    }
    let mut seen = HashSet::new();
    let mut open: Vec<&str> = Vec::new();
    for message in messages {
        match message {
            Message::Assistant { tool_calls, .. } => {
                if let Some(id) = open.first() {
                    return Err(HistoryError::MissingResult((*id).to_owned()));
                }
                for call in tool_calls {
                    if !seen.insert(call.id.as_str()) {
                        return Err(HistoryError::DuplicateCallId(call.id.clone()));
                    }
                    open.push(&call.id);
                }
            }
            Message::Tool { tool_call_id, .. } => {
                match open.iter().position(|id| id == tool_call_id) {
                    Some(i) => {
                        open.remove(i);
                    }
                    None => return Err(HistoryError::OrphanResult(tool_call_id.clone())),
                }
            }
            Message::System { .. } | Message::User { .. } | Message::Note { .. } => {
                if let Some(id) = open.first() {
                    return Err(HistoryError::MissingResult((*id).to_owned()));
                }
            }
        }
    }
    match open.first() {
        Some(id) => Err(HistoryError::MissingResult((*id).to_owned())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use buddy_core::ToolCall;

    fn call(id: &str) -> Message {
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall::new(id, "t", "{}")],
        }
    }

    #[test]
    fn accepts_paired_history_and_refuses_broken_ones() {
        let ok = vec![
            Message::user("hi"),
            call("a"),
            Message::tool_result("a", "x", false),
        ];
        assert_eq!(check_history(&ok), Ok(()));
        assert_eq!(
            check_history(&[Message::system("s")]),
            Err(HistoryError::NoUserMessage)
        );
        let orphan = vec![Message::user("hi"), Message::tool_result("a", "x", false)];
        assert_eq!(
            check_history(&orphan),
            Err(HistoryError::OrphanResult("a".into()))
        );
        let missing = vec![Message::user("hi"), call("a")];
        assert_eq!(
            check_history(&missing),
            Err(HistoryError::MissingResult("a".into()))
        );
        let dup = vec![
            Message::user("hi"),
            call("a"),
            Message::tool_result("a", "x", false),
            call("a"),
            Message::tool_result("a", "x", false),
        ];
        assert_eq!(
            check_history(&dup),
            Err(HistoryError::DuplicateCallId("a".into()))
        );
    }
}
