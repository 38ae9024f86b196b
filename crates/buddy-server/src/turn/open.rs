//! Opening a turn: its claim (one turn per conversation, a cap per key), its history,
//! and the one write that records it (with a new conversation, when it makes one).

use std::collections::HashMap;
use std::sync::Arc;

use buddy_core::{Message, RecordedTask, StopReason, TokenCount};
use buddy_engine::{Resume, calls_left_open};
use buddy_store::{CountedHistory, Store, TurnEnd, TurnOpening, new_id};
use tokio_util::sync::CancellationToken;

use super::place::{Place, Placed};
use super::session;
use super::spec::{Conversation, Settings, TurnSpec};
use crate::backend::Resolved;
use crate::caller::Caller;
use crate::error::AppError;
use crate::state::{AppState, TurnLease};

/// A claimed turn whose opening is recorded: the history the engine starts from, and
/// what is left of its spec for the run.
pub(crate) struct Opened {
    pub turn_id: String,
    pub cancel: CancellationToken,
    pub conversation_id: Option<String>,
    pub lease: TurnLease,
    /// The turn's opening wrote the user's message already.
    pub user_stored: bool,
    pub history: Vec<Message>,
    pub counts: Vec<Option<TokenCount>>,
    /// The spec, its conversation, input and instructions taken into `history`.
    pub spec: TurnSpec,
    /// The provider, tools and model the turn runs on.
    pub resolved: Resolved,
    /// The tasks calls a crash left open became, by call id: waited on again.
    pub open_tasks: HashMap<String, RecordedTask>,
}

/// Claims the turn, loads its history and records its opening. Whatever fails frees
/// the claim at once and leaves nothing stored; no model has been called.
pub(crate) async fn open(
    state: &AppState,
    caller: &Caller,
    mut spec: TurnSpec,
    resolved: Resolved,
) -> Result<Opened, AppError> {
    let turn_id = new_id("turn");
    let cancel = state.inner.shutdown.child_token();
    let conversation = std::mem::replace(&mut spec.conversation, Conversation::Stored(None));
    let placed = place(
        state,
        caller,
        &turn_id,
        &cancel,
        conversation,
        &spec,
        &resolved,
    )
    .await?;
    // A client session's new messages go in with the opening, before the request's own.
    spec.append.splice(0..0, placed.new_messages);
    let (place, history) = (placed.place, placed.history);
    let CountedHistory {
        messages: mut history,
        mut counts,
        ..
    } = history;
    let writing = Writing {
        history: &history,
        spec: &spec,
        model: &resolved.model,
    };
    let (conversation_id, lease, user_stored) =
        record(state, caller, &turn_id, &cancel, place, writing).await?;
    let open_tasks = match &conversation_id {
        Some(id) if !calls_left_open(&history).is_empty() => {
            match state.inner.store.call_tasks(id).await {
                Ok(tasks) => tasks,
                Err(e) => {
                    // Not fatal: the open calls are answered as interrupted, as without.
                    tracing::warn!(conversation = %id, error = %e, "cannot read the tasks of calls a crash left open");
                    HashMap::new()
                }
            }
        }
        _ => HashMap::new(),
    };
    history.append(&mut spec.append);
    counts.resize(history.len(), None);
    if let Some(instructions) = spec.instructions.take() {
        let after_system = history
            .iter()
            .position(|m| !matches!(m, Message::System { .. }))
            .unwrap_or(history.len());
        history.insert(after_system, Message::system(instructions));
        counts.insert(after_system, None);
    }
    Ok(Opened {
        turn_id,
        cancel,
        conversation_id,
        lease,
        user_stored,
        history,
        counts,
        spec,
        resolved,
        open_tasks,
    })
}

/// What a turn's opening writes: its first messages, from its spec, on its model.
struct Writing<'a> {
    history: &'a [Message],
    spec: &'a TurnSpec,
    model: &'a str,
}

/// Claims the turn where its conversation is, and reads that conversation's history.
async fn place(
    state: &AppState,
    caller: &Caller,
    turn_id: &str,
    cancel: &CancellationToken,
    conversation: Conversation,
    spec: &TurnSpec,
    resolved: &Resolved,
) -> Result<Placed, AppError> {
    let store = &state.inner.store;
    let (place, history) = match conversation {
        Conversation::Ephemeral(history) => {
            let lease = state.claim(turn_id, None, &caller.owner, cancel).await?;
            let history = CountedHistory {
                messages: history,
                ..CountedHistory::default()
            };
            (Place::Ephemeral(lease), history)
        }
        Conversation::Stored(Some(id)) => {
            let lease = state
                .claim(turn_id, Some(&id), &caller.owner, cancel)
                .await?;
            let history = match &spec.resume {
                // Checked under the claim: of two resumes of one pause, the second finds
                // the pause already answered.
                Some(resume) => {
                    resumable(store, &id, resume)
                        .await
                        .map(|messages| CountedHistory {
                            messages,
                            ..CountedHistory::default()
                        })
                }
                // With the counts kept with the messages: they are not counted again.
                None => store.load_counted(&id).await.map_err(AppError::from),
            };
            match history {
                Ok(history) => (Place::Existing(id, lease), history),
                Err(e) => {
                    // Freed now, not when dropped: the client's next request must find it free.
                    lease.release().await;
                    return Err(e);
                }
            }
        }
        Conversation::After {
            conversation,
            after,
            named,
        } => {
            let place = After {
                conversation: &conversation,
                turn: &after,
                named: &named,
            };
            return after_turn(state, caller, turn_id, cancel, place)
                .await
                .map(Placed::kept);
        }
        Conversation::Session { key, history } => {
            return session::place(state, caller, turn_id, cancel, &key, history).await;
        }
        Conversation::Stored(None) => {
            let system = resolved.system.iter().map(Message::system).collect();
            let history = CountedHistory {
                messages: system,
                ..CountedHistory::default()
            };
            (Place::New, history)
        }
    };
    Ok(Placed::kept((place, history)))
}

/// The stored turn a turn goes on after: its conversation, its id, and how the client
/// named it (the response id its errors say, never the turn's own).
struct After<'a> {
    conversation: &'a str,
    turn: &'a str,
    named: &'a str,
}

/// Claims a turn that goes on after turn `after` of `conversation`: in that conversation
/// when `after` is its last turn and it is free, else as a branch — a new conversation
/// whose history is the messages up to the end of `after`. A deleted (hidden) or unknown
/// `after` is not found; one still running is refused, as its messages are not whole.
async fn after_turn(
    state: &AppState,
    caller: &Caller,
    turn_id: &str,
    cancel: &CancellationToken,
    After {
        conversation,
        turn: after,
        named,
    }: After<'_>,
) -> Result<(Place, CountedHistory), AppError> {
    let store = &state.inner.store;
    let gone = || AppError::NotFound(format!("response `{named}` does not exist"));
    let detail = store
        .get_conversation(conversation)
        .await?
        .ok_or_else(gone)?;
    let record = detail.live_turn(after).ok_or_else(gone)?;
    if record.stop_reason.is_none() {
        return Err(AppError::Conflict(format!(
            "response `{named}` is still in progress; continue from it once it has completed \
             (or cancel it)"
        )));
    }
    if detail.turns.last().is_some_and(|t| t.id == after) {
        match state
            .claim(turn_id, Some(conversation), &caller.owner, cancel)
            .await
        {
            Ok(lease) => {
                return match store.load_counted(conversation).await {
                    Ok(history) => Ok((Place::Existing(conversation.to_owned(), lease), history)),
                    Err(e) => {
                        lease.release().await;
                        Err(e.into())
                    }
                };
            }
            // Another turn goes on from here already: this one is a branch beside it.
            Err(AppError::Conflict(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let end = detail.through_turn(after);
    let (mut messages, mut turns) = (detail.messages, detail.message_turns);
    messages.truncate(end);
    turns.truncate(end);
    let history = CountedHistory {
        messages,
        ..CountedHistory::default()
    };
    Ok((Place::Branch(turns), history))
}

/// Records a stored turn's opening in one write: the conversation (when new), settings,
/// the turn's record and its first messages. If it fails nothing of it is kept, and the
/// claim is freed. Returns the conversation, the claim, and whether the user's message
/// went in.
async fn record(
    state: &AppState,
    caller: &Caller,
    turn_id: &str,
    cancel: &CancellationToken,
    place: Place,
    writing: Writing<'_>,
) -> Result<(Option<String>, TurnLease, bool), AppError> {
    let Writing {
        history,
        spec,
        model,
    } = writing;
    let store = &state.inner.store;
    let kept = match &spec.settings {
        Settings::Kept(Some(new)) => Some(new.to_value()),
        Settings::Kept(None) | Settings::RequestOnly => None,
    };
    let first = |created| {
        opening_messages(
            history,
            created,
            &spec.append,
            spec.user_message.as_deref(),
            model,
        )
    };
    let opening = TurnOpening {
        conversation: None,
        owner: &caller.owner,
        turn: turn_id,
        model,
        settings: kept.as_ref(),
        messages: &[],
        counts: &[],
        copied: &[],
        copied_turns: &[],
    };
    Ok(match place {
        Place::Ephemeral(lease) => (None, lease, false),
        Place::Existing(id, lease) => {
            let (first, user_stored) = first(false);
            let opened = store.open_turn(TurnOpening {
                conversation: Some(&id),
                messages: &first.messages,
                counts: &first.counts,
                ..opening
            });
            if let Err(e) = opened.await {
                // Freed now, not when dropped: the client's next request must find it free.
                lease.release().await;
                return Err(e.into());
            }
            (Some(id), lease, user_stored)
        }
        place @ (Place::New | Place::Branch(_) | Place::NewSession(_)) => {
            let session = match &place {
                Place::NewSession(key) => Some(session::settings(key)),
                _ => None,
            };
            let copied_turns = match place {
                Place::Branch(turns) => turns,
                _ => Vec::new(),
            };
            let branch = !copied_turns.is_empty();
            let (first, user_stored) = first(!branch);
            // Written and claimed together: a refused claim keeps nothing.
            let opening = TurnOpening {
                messages: &first.messages,
                counts: &first.counts,
                copied: if branch { history } else { &[] },
                copied_turns: &copied_turns,
                settings: session.as_ref().or(opening.settings),
                ..opening
            };
            let (id, lease) = state.open_claimed(opening, cancel).await?;
            (Some(id), lease, user_stored)
        }
    })
}

/// The messages a stored turn's opening writes: a new conversation's `history` (its
/// system prompt), the request's `append`, and the user's message with the count the
/// engine would make (so no later turn counts it) when it comes first; the flag says
/// whether the user's message is among them.
fn opening_messages(
    history: &[Message],
    created: bool,
    append: &[Message],
    user_message: Option<&str>,
    model: &str,
) -> (CountedHistory, bool) {
    let mut first = CountedHistory::default();
    if created {
        first.messages.extend_from_slice(history);
    }
    first.messages.extend_from_slice(append);
    first.counts.resize(first.messages.len(), None);
    let Some(text) = user_message.filter(|_| user_message_comes_first(history, append)) else {
        return (first, false);
    };
    let counter = buddy_engine::context::counter_for_model(model);
    let message = Message::user(text);
    first.counts.push(Some(TokenCount {
        encoding: buddy_engine::context::count_key(&*counter),
        tokens: counter.message(&message) as u64,
    }));
    first.messages.push(message);
    (first, true)
}

/// True when the turn's first record is its user message: the history does not end
/// in a round the engine must first answer as interrupted (a call message, or results
/// that may leave some of its calls open). Then the user's message can go in with the
/// turn's opening.
fn user_message_comes_first(history: &[Message], append: &[Message]) -> bool {
    match append.last().or(history.last()) {
        Some(Message::Assistant { tool_calls, .. }) => tool_calls.is_empty(),
        Some(Message::Tool { .. }) => false,
        _ => true,
    }
}

/// The history of a conversation a resume may go on with; refused when the resume does
/// not fit how its last turn ended: decisions need a turn paused for approval, a continue
/// needs one stopped at a limit.
async fn resumable(
    store: &Arc<dyn Store>,
    id: &str,
    resume: &Resume,
) -> Result<Vec<Message>, AppError> {
    let detail = store
        .get_conversation(id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("conversation `{id}` does not exist")))?;
    let last = detail.turns.last().and_then(|t| t.stop_reason);
    let ended = last.map_or("nothing (no turn has ended)", TurnEnd::as_str);
    // `interrupted` (a turn a crashed server never finished) is no stop reason: it fits neither.
    let reason = last.and_then(TurnEnd::stop_reason);
    let fits = match resume {
        Resume::Decisions(_) => reason == Some(StopReason::ApprovalRequired),
        Resume::Continue => reason.is_some_and(StopReason::is_capped),
    };
    if fits {
        return Ok(detail.messages);
    }
    Err(AppError::Conflict(match resume {
        Resume::Decisions(_) => format!(
            "conversation `{id}` has no calls waiting for approval: its last turn ended `{ended}`. \
             Each waiting call is decided once; a repeated resume is refused"
        ),
        Resume::Continue => format!(
            "conversation `{id}` cannot be continued: its last turn ended `{ended}`, not at a \
             limit (max_model_calls, max_tool_calls, token_budget, deadline)"
        ),
    }))
}
