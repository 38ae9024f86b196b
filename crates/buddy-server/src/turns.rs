//! Starting a turn for an endpoint: quota, conversation, policy, recording, metrics.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use buddy_core::{
    BoxFuture, ChatEvent, Message, MessageSink, RecordError, StopReason, TokenCount, Usd,
};
use buddy_engine::{Engine, PolicyPatch, Resume, TurnRequest};
use buddy_store::{CountedHistory, Store, TurnClosing, TurnEnd, TurnOpening, new_id};
use buddy_telemetry::TurnScope;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::auth::Caller;
use crate::backend::Resolved;
use crate::error::AppError;
use crate::metrics::{TimedProvider, observe_event, observe_turn};
use crate::spend;
use crate::state::{AppState, TurnLease};
use crate::turn_log::{EventLog, Watch};

/// Writes a turn's messages to the store. An assistant message that calls tools is
/// written at once (so a crash mid-tool still shows what was running); the results of
/// its calls are kept back until all are in, then written together in one transaction.
/// The user's message usually went in with the turn's opening, and the answer goes in
/// with the turn's end, so a turn of n rounds writes 2n + 2 times. A failed write is
/// reported to the engine, which stops the turn and writes nothing more, so the store
/// holds whole rounds, or a last call message with no results at all — which the next
/// turn answers as interrupted before going on.
struct StoreSink {
    store: Arc<dyn Store>,
    conversation: String,
    turn: String,
    pending: Mutex<Round>,
}

/// Messages waiting for their round to be complete, with their token counts.
#[derive(Default)]
struct Round {
    kept: CountedHistory,
    open_calls: HashSet<String>,
    /// The user's message went in with the turn's opening: the engine's record of it,
    /// the turn's first, is already kept.
    user_stored: bool,
}

impl Round {
    fn take(&mut self) -> CountedHistory {
        std::mem::take(&mut self.kept)
    }
}

impl StoreSink {
    async fn write(&self, batch: CountedHistory) -> Result<(), RecordError> {
        if batch.messages.is_empty() {
            return Ok(());
        }
        self.store
            .append_counted(
                &self.conversation,
                &self.turn,
                &batch.messages,
                &batch.counts,
            )
            .await
            .map_err(|e| {
                tracing::error!(conversation = %self.conversation, turn = %self.turn, error = %e, "messages not stored");
                RecordError(e.to_string())
            })
    }

    /// What is still kept back when the turn ends (its answer, or a round the end cut
    /// short): written with the turn's end.
    fn rest(&self) -> Result<CountedHistory, RecordError> {
        match self.pending.lock() {
            Ok(mut round) => Ok(round.take()),
            Err(_) => Err(RecordError("the message buffer is poisoned".into())),
        }
    }
}

impl MessageSink for StoreSink {
    fn record<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, Result<(), RecordError>> {
        self.keep(message, None)
    }

    fn record_counted<'a>(
        &'a self,
        message: &'a Message,
        count: TokenCount,
    ) -> BoxFuture<'a, Result<(), RecordError>> {
        self.keep(message, Some(count))
    }
}

impl StoreSink {
    /// Keeps `message` back until its round is whole, then writes the round.
    fn keep<'a>(
        &'a self,
        message: &'a Message,
        count: Option<TokenCount>,
    ) -> BoxFuture<'a, Result<(), RecordError>> {
        Box::pin(async move {
            let batch = {
                let mut round = self
                    .pending
                    .lock()
                    .map_err(|_| RecordError("the message buffer is poisoned".into()))?;
                if std::mem::take(&mut round.user_stored) && message.is_user() {
                    return Ok(());
                }
                round.kept.messages.push(message.clone());
                round.kept.counts.push(count);
                match message {
                    Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                        round
                            .open_calls
                            .extend(tool_calls.iter().map(|c| c.id.clone()));
                        // The call message goes out now; its results will follow together.
                        round.take()
                    }
                    Message::Tool { tool_call_id, .. } => {
                        round.open_calls.remove(tool_call_id);
                        if round.open_calls.is_empty() {
                            round.take()
                        } else {
                            CountedHistory::default()
                        }
                    }
                    // An answer waits for the turn's end, to be written with it; a message
                    // after it (the turn went on) takes it along.
                    Message::Assistant { .. } => CountedHistory::default(),
                    _ if round.open_calls.is_empty() => round.take(),
                    _ => CountedHistory::default(),
                }
            };
            self.write(batch).await
        })
    }
}

/// Where a turn's conversation lives.
pub(crate) enum Conversation {
    /// In the store: an existing id, or a new conversation.
    Stored(Option<String>),
    /// Only in the request (the OpenAI endpoint: clients send the whole history).
    Ephemeral(Vec<Message>),
}

/// Messages a request adds before its turn runs (beyond a user message), and a system
/// prompt for this turn only.
#[derive(Default)]
pub(crate) struct Prelude {
    /// Added to the conversation (and stored with it) before the turn: the Responses
    /// API's input items, such as the results of tools the client ran.
    pub append: Vec<Message>,
    /// A system prompt used for this turn and not stored (`instructions`).
    pub instructions: Option<String>,
    /// Goes on with the conversation's paused or capped turn instead of a new message.
    pub resume: Option<Resume>,
    /// An OpenAI-compatible endpoint: no client can answer an approval question.
    pub openai: bool,
    /// Hand the turn's whole conversation back when it ends (`StartedTurn::messages`):
    /// for a conversation the caller holds itself.
    pub keep_messages: bool,
    /// The client's sampling and output settings (temperature, structured output, …).
    pub sampling: buddy_core::Sampling,
    /// New settings (checked) kept with the conversation for this and later turns.
    pub settings: Option<serde_json::Value>,
}

/// A running turn, as an endpoint sees it.
pub(crate) struct StartedTurn {
    /// The turn's events from the first: this request's watch of the turn's log.
    pub events: Watch<ChatEvent>,
    /// Cancels the turn (a client that went away, where the server is set to).
    pub cancel: CancellationToken,
    pub conversation_id: Option<String>,
    pub turn_id: String,
    pub model: String,
    /// The whole conversation once the turn has ended (asked for with
    /// `Prelude::keep_messages`).
    pub messages: Option<tokio::sync::oneshot::Receiver<Vec<Message>>>,
}

/// Room between the engine and the turn's log.
const EVENT_BUFFER: usize = 256;

/// The policy of a turn: the operator's for this model, lowered (never raised) by the
/// request's own; one that would raise a limit is a 400 naming it.
pub(crate) fn turn_policy(
    state: &AppState,
    resolved: &Resolved,
    request_policy: &PolicyPatch,
) -> Result<buddy_engine::LoopPolicy, AppError> {
    let policies = &state.inner.policy;
    let bad = |e: buddy_engine::PolicyError| AppError::BadRequest(e.to_string());
    let ceiling = policies
        .resolve(&resolved.model, &[&resolved.policy])
        .map_err(bad)?;
    let asked = policies
        .resolve(&resolved.model, &[&resolved.policy, request_policy])
        .map_err(bad)?;
    let raised = asked.raised_above(
        &ceiling,
        &resolved.model,
        state.inner.settings.allow_loop_detection_off,
    );
    if !raised.is_empty() {
        let list: Vec<String> = raised.iter().map(ToString::to_string).collect();
        return Err(AppError::BadRequest(format!(
            "the request's policy asks for more than this server allows: {}. A request may \
             only lower limits; the operator sets them in buddy.toml",
            list.join("; ")
        )));
    }
    Ok(asked)
}

/// Where a turn's conversation stands before its opening is written.
enum Place {
    /// The client holds it (an OpenAI endpoint); the turn is claimed.
    Ephemeral(TurnLease),
    /// Stored already, with this id; the turn is claimed.
    Existing(String, TurnLease),
    /// Made by the turn's opening, then claimed.
    New,
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

/// Starts a turn on its own task. The turn is recorded (stop reason and stats) however
/// it ends, even when the client leaves; its terminal event goes out only once the
/// turn is stored, and says `store_error` when it could not be.
pub(crate) async fn start_turn(
    state: &AppState,
    caller: &Caller,
    conversation: Conversation,
    user_message: Option<String>,
    resolved: Resolved,
    request_policy: &PolicyPatch,
    prelude: Prelude,
) -> Result<StartedTurn, AppError> {
    let mut policy = turn_policy(state, &resolved, request_policy)?;
    let prelude_keeps = prelude.keep_messages;
    // Refused before anything is claimed or stored: a setting the model cannot honour is
    // a 400 naming it, never dropped.
    if let Some(wrong) = prelude
        .sampling
        .validate()
        .err()
        .or_else(|| resolved.provider.unsupported(&prelude.sampling))
        .or_else(|| resolved.provider.refuses_any(&prelude.append))
        .or_else(|| match &conversation {
            Conversation::Ephemeral(history) => resolved.provider.refuses_any(history),
            Conversation::Stored(_) => None,
        })
    {
        return Err(AppError::BadRequest(wrong));
    }
    let store = Arc::clone(&state.inner.store);
    let price = state
        .inner
        .settings
        .prices
        .price(resolved.provider.name(), &resolved.model);
    let room = spend::room(
        &*store,
        &caller.owner,
        &caller.name,
        caller.spend,
        time::OffsetDateTime::now_utc(),
    )
    .await?;
    // A turn may not spend past the key's ceiling: the room left is its money budget
    // (when the model's price is known; a turn without a price has no cost to count).
    if let (Some(room), Some(_)) = (room, price) {
        policy.max_turn_cost_usd = Some(policy.max_turn_cost_usd.map_or(room, |b| b.min(room)));
    }
    let turn_id = new_id("turn");
    let cancel = state.inner.shutdown.child_token();
    let (place, history) = match conversation {
        Conversation::Ephemeral(history) => {
            let lease = state.claim(&turn_id, None, &caller.owner, &cancel).await?;
            let history = CountedHistory {
                messages: history,
                counts: Vec::new(),
            };
            (Place::Ephemeral(lease), history)
        }
        Conversation::Stored(Some(id)) => {
            let lease = state
                .claim(&turn_id, Some(&id), &caller.owner, &cancel)
                .await?;
            let history = match &prelude.resume {
                // Checked under the claim: of two resumes of one pause, the second finds
                // the pause already answered.
                Some(resume) => {
                    resumable(&store, &id, resume)
                        .await
                        .map(|messages| CountedHistory {
                            messages,
                            counts: Vec::new(),
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
        Conversation::Stored(None) => {
            let system = resolved.system.iter().map(Message::system).collect();
            let history = CountedHistory {
                messages: system,
                counts: Vec::new(),
            };
            (Place::New, history)
        }
    };
    let CountedHistory {
        messages: history,
        mut counts,
    } = history;
    // A stored turn's opening is one write: the conversation (when new), settings, the
    // turn's record and its first messages. If it fails nothing of it is kept, and no
    // model was called.
    let first = |created| {
        opening_messages(
            &history,
            created,
            &prelude.append,
            user_message.as_deref(),
            &resolved.model,
        )
    };
    let opening = TurnOpening {
        conversation: None,
        owner: &caller.owner,
        turn: &turn_id,
        model: &resolved.model,
        settings: prelude.settings.as_ref(),
        messages: &[],
        counts: &[],
    };
    let (conversation_id, lease, user_stored) = match place {
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
        Place::New => {
            let (first, user_stored) = first(true);
            let opened = store.open_turn(TurnOpening {
                messages: &first.messages,
                counts: &first.counts,
                ..opening
            });
            let id = opened.await?;
            // A new conversation is claimed once it exists; if that is refused, the
            // conversation made for this turn goes too.
            match state
                .claim(&turn_id, Some(&id), &caller.owner, &cancel)
                .await
            {
                Ok(lease) => (Some(id), lease, user_stored),
                Err(e) => {
                    let _ = store.delete_conversation(&id).await;
                    return Err(e);
                }
            }
        }
    };
    let mut history = history;
    history.extend(prelude.append);
    counts.resize(history.len(), None);
    if let Some(instructions) = prelude.instructions {
        let after_system = history
            .iter()
            .position(|m| !matches!(m, Message::System { .. }))
            .unwrap_or(history.len());
        history.insert(after_system, Message::system(instructions));
        counts.insert(after_system, None);
    }
    let approval = if prelude.openai {
        state.inner.settings.openai_approval.clone()
    } else {
        state.inner.settings.approval.clone()
    };
    let mut request = TurnRequest::new(resolved.model.clone(), String::new())
        .with_price(price)
        .with_history(history)
        .with_history_counts(counts)
        .with_policy(policy)
        .with_cancel(cancel.clone())
        .with_approval(approval);
    request.user_message = user_message;
    request.resume = prelude.resume;
    request.sampling = prelude.sampling;
    if let Some(telemetry) = &state.inner.settings.telemetry {
        let trace = caller.trace.as_ref();
        request = request.with_observer(telemetry.turn(TurnScope {
            traceparent: trace.map(|t| t.traceparent.as_str()),
            tracestate: trace.and_then(|t| t.tracestate.as_deref()),
            provider: resolved.provider.name(),
            model: &resolved.model,
            conversation: conversation_id.as_deref(),
        }));
    }
    let sink = conversation_id.as_ref().map(|id| {
        Arc::new(StoreSink {
            store: Arc::clone(&store),
            conversation: id.clone(),
            turn: turn_id.clone(),
            pending: Mutex::new(Round {
                user_stored,
                ..Round::default()
            }),
        })
    });
    if let Some(sink) = &sink {
        request = request.with_recorder(Arc::clone(sink) as Arc<dyn MessageSink>);
    }
    let provider_name = resolved.provider.name().to_owned();
    let model_name = resolved.model.clone();
    let engine = Engine::new(
        Arc::new(TimedProvider {
            inner: resolved.provider,
        }),
        resolved.toolbox,
    );
    let turn_log = EventLog::new(turn_id.clone(), caller.owner.clone());
    let kept = state.keep_log(&turn_log);
    let watch = turn_log.watch(0);
    let (kept_tx, kept_rx) = match prelude_keeps {
        true => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            (Some(tx), Some(rx))
        }
        false => (None, None),
    };
    let recorded_turn = turn_id.clone();
    let key_name = caller.name.clone();
    let owner = caller.owner.clone();
    state.inner.turns.spawn(async move {
        let (inner_tx, mut inner_rx) = mpsc::channel(EVENT_BUFFER);
        let forward = async {
            let mut terminal = None;
            while let Some(event) = inner_rx.recv().await {
                observe_event(&event, &provider_name);
                if event.is_terminal() {
                    terminal = Some(event);
                    continue;
                }
                turn_log.push(event);
            }
            terminal
        };
        let (outcome, terminal) = tokio::join!(engine.run(request, inner_tx), forward);
        let mut reason = outcome.reason;
        let mut terminal = terminal;
        if let Some(sink) = &sink {
            // The tape lets an operator replay the turn under another policy later.
            let tape = serde_json::to_string(&outcome.tape).ok();
            let stored = match sink.rest() {
                Ok(last) => store
                    .close_turn(TurnClosing {
                        conversation: &sink.conversation,
                        turn: &recorded_turn,
                        last: &last,
                        reason,
                        stats: &outcome.stats,
                        error: outcome.error.as_deref(),
                        tape: tape.as_deref(),
                    })
                    .await
                    .map_err(|e| RecordError(e.to_string())),
                Err(e) => Err(e),
            };
            if let Err(e) = stored {
                tracing::error!(turn = %recorded_turn, error = %e, "turn end not stored");
                reason = StopReason::StoreError;
                terminal = Some(ChatEvent::Error {
                    reason,
                    message: format!(
                        "the turn ran but could not be stored ({e}); the conversation may lack \
                         its last messages. Check the server's store"
                    ),
                    stats: outcome.stats,
                });
            }
        }
        observe_turn(reason, &outcome.stats, &provider_name, &model_name, &key_name);
        if let Some(kept) = kept_tx {
            let _ = kept.send(outcome.messages.clone());
        }
        if let Some(cost) = outcome.stats.cost_usd.filter(|c| *c > Usd::ZERO) {
            let today = spend::day(time::OffsetDateTime::now_utc());
            if let Err(e) = store.add_spend(&owner, &today, cost).await {
                tracing::error!(key = %key_name, error = %e, "the turn's cost was not added to the key's spend");
            }
        }
        tracing::info!(turn = %recorded_turn, conversation = ?sink.as_ref().map(|s| &s.conversation), key = %key_name,
            reason = %reason, model_calls = outcome.stats.model_calls, tool_calls = outcome.stats.tool_calls, "turn ended");
        // Free the conversation and the key's slot before the client hears the turn
        // ended, so that its next message is never refused as concurrent.
        lease.release().await;
        match terminal {
            Some(terminal) => {
                turn_log.push(terminal);
            }
            None => turn_log.close(),
        }
        kept.ended().await;
    });
    Ok(StartedTurn {
        events: watch,
        cancel,
        conversation_id,
        turn_id,
        model: resolved.model,
        messages: kept_rx,
    })
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

/// What a streaming endpoint holds of its turn: the turn runs on when the client goes,
/// unless the server is set to cancel on disconnect (`[server] cancel_on_disconnect`).
pub(crate) fn disconnect_guard(
    state: &AppState,
    cancel: CancellationToken,
) -> Option<CancelOnDrop> {
    state
        .inner
        .settings
        .cancel_on_disconnect
        .then(|| CancelOnDrop(cancel))
}

/// Cancels a turn when dropped: the response stream holding it went away.
pub(crate) struct CancelOnDrop(pub CancellationToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}
