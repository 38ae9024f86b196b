//! Starting a turn for an endpoint: quota, conversation, policy, recording, metrics.

use std::sync::Arc;

use buddy_core::{BoxFuture, ChatEvent, Message, MessageSink};
use buddy_engine::{Engine, PolicyPatch, TurnRequest};
use buddy_store::{Store, new_id};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::backend::Resolved;
use crate::error::AppError;
use crate::metrics::{TimedProvider, observe_event, observe_turn};
use crate::state::AppState;

/// Writes every message of a turn to the store as it is produced.
struct StoreSink {
    store: Arc<dyn Store>,
    conversation: String,
    turn: String,
}

impl MessageSink for StoreSink {
    fn record<'a>(&'a self, message: &'a Message) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(e) = self
                .store
                .append_message(&self.conversation, &self.turn, message)
                .await
            {
                tracing::error!(conversation = %self.conversation, turn = %self.turn, error = %e, "message not stored");
            }
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

/// A running turn, as an endpoint sees it.
pub(crate) struct StartedTurn {
    pub events: mpsc::Receiver<ChatEvent>,
    /// Cancels the turn (a client that went away).
    pub cancel: CancellationToken,
    pub conversation_id: Option<String>,
    pub turn_id: String,
    pub model: String,
}

/// Room between the engine and a slow client before the engine waits.
const EVENT_BUFFER: usize = 256;

/// Starts a turn on its own task. The turn is recorded (stop reason and stats) however
/// it ends, even when the client leaves.
pub(crate) async fn start_turn(
    state: &AppState,
    caller: &str,
    conversation: Conversation,
    user_message: Option<String>,
    resolved: Resolved,
    request_policy: &PolicyPatch,
) -> Result<StartedTurn, AppError> {
    let policy = state
        .inner
        .policy
        .resolve(&resolved.model, &[&resolved.policy, request_policy])
        .map_err(|e| AppError::BadRequest(e.to_string()))?;
    let slot = state.take_slot(caller)?;
    let store = Arc::clone(&state.inner.store);
    let turn_id = new_id("turn");
    let (conversation_id, history) = match conversation {
        Conversation::Ephemeral(history) => (None, history),
        Conversation::Stored(Some(id)) => {
            let history = store.load_messages(&id).await?;
            (Some(id), history)
        }
        Conversation::Stored(None) => {
            let id = store.create_conversation().await?;
            if let Some(system) = &resolved.system {
                store
                    .append_message(&id, &turn_id, &Message::system(system.clone()))
                    .await?;
            }
            (
                Some(id),
                resolved.system.iter().map(Message::system).collect(),
            )
        }
    };
    if let Some(id) = &conversation_id {
        store.begin_turn(id, &turn_id, &resolved.model).await?;
    }
    let cancel = state.inner.shutdown.child_token();
    let mut request = TurnRequest::new(resolved.model.clone(), String::new())
        .with_history(history)
        .with_policy(policy)
        .with_cancel(cancel.clone());
    request.user_message = user_message;
    if let Some(id) = &conversation_id {
        request = request.with_recorder(Arc::new(StoreSink {
            store: Arc::clone(&store),
            conversation: id.clone(),
            turn: turn_id.clone(),
        }));
    }
    let provider_name = resolved.provider.name().to_owned();
    let engine = Engine::new(
        Arc::new(TimedProvider {
            inner: resolved.provider,
        }),
        resolved.toolbox,
    );
    let (tx, rx) = mpsc::channel(EVENT_BUFFER);
    let (recorded_turn, recorded_conversation) = (turn_id.clone(), conversation_id.clone());
    state.inner.turns.spawn(async move {
        let _slot = slot;
        let (inner_tx, mut inner_rx) = mpsc::channel(EVENT_BUFFER);
        let forward = async {
            while let Some(event) = inner_rx.recv().await {
                observe_event(&event, &provider_name);
                // A client that left stops receiving; the turn itself was cancelled.
                let _ = tx.send(event).await;
            }
        };
        let (outcome, ()) = tokio::join!(engine.run(request, inner_tx), forward);
        observe_turn(outcome.reason, &outcome.stats, &provider_name);
        tracing::info!(turn = %recorded_turn, conversation = ?recorded_conversation, reason = %outcome.reason,
            model_calls = outcome.stats.model_calls, tool_calls = outcome.stats.tool_calls, "turn ended");
        if recorded_conversation.is_some()
            && let Err(e) = store
                .finish_turn(&recorded_turn, outcome.reason, &outcome.stats, outcome.error.as_deref())
                .await
        {
            tracing::error!(turn = %recorded_turn, error = %e, "turn end not stored");
        }
    });
    Ok(StartedTurn {
        events: rx,
        cancel,
        conversation_id,
        turn_id,
        model: resolved.model,
    })
}

/// Cancels a turn when dropped: the response stream holding it went away.
pub(crate) struct CancelOnDrop(pub CancellationToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}
