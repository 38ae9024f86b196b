//! A client session kept as a conversation (guard mode). Claude Code, codex and other
//! clients send their whole history with every request; buddy runs each turn on that
//! history as sent and keeps what it adds in the session's conversation, so the session
//! shows on the chat page, and `buddy replay` and `buddy judge` work on it.
//!
//! A request goes on with the session's conversation when its last assistant message is
//! the conversation's last reply: the messages after it (the results of the client's
//! tools, the user's next words) are appended. Otherwise (a first request, a history the
//! client rewrote or compacted) the whole history starts a new conversation under the
//! same key. A request that finds a turn still running there runs unkept.

use axum::http::HeaderMap;
use buddy_core::Message;
use buddy_store::CountedHistory;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::place::{Place, Placed};
use super::spec::Conversation;
use crate::caller::Caller;
use crate::client_session;
use crate::error::AppError;
use crate::state::AppState;

/// Where a request that carries its whole `history` keeps its turn: in its session's
/// conversation when it names a session (and the server keeps client sessions, `[server]
/// keep_client_sessions`), else nowhere.
pub(crate) fn client_conversation(
    state: &AppState,
    headers: &HeaderMap,
    user_id: Option<&str>,
    history: Vec<Message>,
) -> Conversation {
    let session = client_session::session_id(headers, user_id)
        .filter(|_| state.inner.settings.keep_client_sessions);
    match session {
        Some(session) => Conversation::Session {
            key: client_session::thread_key(&session, &history),
            history,
        },
        None => Conversation::Ephemeral(history),
    }
}

/// The settings a session's new conversation is made with: its key, in the metadata
/// (shown with the conversation; how the next request finds it).
pub(super) fn settings(key: &str) -> Value {
    json!({"metadata": {SESSION_FIELD: key}})
}

/// The metadata field a session conversation's key is kept in.
const SESSION_FIELD: &str = "buddy_session";

/// Claims the turn in the session's conversation when the request goes on with it, or
/// places it in a new one.
pub(super) async fn place(
    state: &AppState,
    caller: &Caller,
    turn_id: &str,
    cancel: &CancellationToken,
    key: &str,
    history: Vec<Message>,
) -> Result<Placed, AppError> {
    let store = &state.inner.store;
    let found = store.session_conversation(&caller.owner, key).await?;
    let last_reply = history
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. }));
    let (Some(id), Some(at)) = (found, last_reply) else {
        return Ok(new_conversation(key, history));
    };
    let lease = match state.claim(turn_id, Some(&id), &caller.owner, cancel).await {
        Ok(lease) => lease,
        // A turn of the session runs there already (a client's parallel request):
        // this one runs on its history as sent and is not kept.
        Err(AppError::Conflict(_)) => {
            let lease = state.claim(turn_id, None, &caller.owner, cancel).await?;
            return Ok(Placed::kept((Place::Ephemeral(lease), counted(history))));
        }
        Err(e) => return Err(e),
    };
    let stored = match store.load_counted(&id).await {
        Ok(stored) => stored,
        Err(e) => {
            lease.release().await;
            return Err(e.into());
        }
    };
    if !goes_on(&stored.messages, &history[at]) {
        lease.release().await;
        return Ok(new_conversation(key, history));
    }
    let mut history = history;
    let new_messages = history.split_off(at + 1);
    Ok(Placed {
        place: Place::Existing(id, lease),
        history: counted(history),
        new_messages,
    })
}

/// A new conversation for the session, holding the request's whole history.
fn new_conversation(key: &str, history: Vec<Message>) -> Placed {
    Placed::kept((Place::NewSession(key.to_owned()), counted(history)))
}

fn counted(messages: Vec<Message>) -> CountedHistory {
    CountedHistory {
        messages,
        ..CountedHistory::default()
    }
}

/// Whether the stored conversation's last reply is `reply`, the last assistant message
/// the client sent back: the same tool calls (by id), or the same text.
fn goes_on(stored: &[Message], reply: &Message) -> bool {
    let last = stored
        .iter()
        .rev()
        .find(|m| matches!(m, Message::Assistant { .. }));
    match (last, reply) {
        (
            Some(Message::Assistant {
                content: kept,
                tool_calls: kept_calls,
            }),
            Message::Assistant {
                content,
                tool_calls,
            },
        ) => {
            if kept_calls.is_empty() && tool_calls.is_empty() {
                let text = |c: &Option<String>| c.as_deref().unwrap_or("").trim().to_owned();
                return text(kept) == text(content);
            }
            let ids = |calls: &[buddy_core::ToolCall]| -> Vec<String> {
                calls.iter().map(|c| c.id.clone()).collect()
            };
            ids(kept_calls) == ids(tool_calls)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use buddy_core::ToolCall;

    fn calls(ids: &[&str]) -> Message {
        Message::Assistant {
            content: Some("looking".into()),
            tool_calls: ids
                .iter()
                .map(|id| ToolCall::new(*id, "Bash", "{}"))
                .collect(),
        }
    }

    #[test]
    fn a_request_goes_on_when_its_last_reply_is_the_stored_one() {
        let stored = vec![Message::user("fix it"), calls(&["toolu_1"])];
        assert!(goes_on(&stored, &calls(&["toolu_1"])));
        assert!(!goes_on(&stored, &calls(&["toolu_2"])));
        let answered = vec![Message::user("hi"), Message::assistant("Hello! ")];
        assert!(goes_on(&answered, &Message::assistant("Hello!")));
        assert!(!goes_on(&answered, &Message::assistant("Bye")));
        assert!(!goes_on(
            &[Message::user("hi")],
            &Message::assistant("Hello!")
        ));
    }
}
