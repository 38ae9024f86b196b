//! Writing a turn's messages to the store, a whole round at a time.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use buddy_core::{BoxFuture, Message, MessageSink, RecordError, TokenCount};
use buddy_store::{CountedHistory, Store};

/// Writes a turn's messages to the store. An assistant message that calls tools is
/// written at once (so a crash mid-tool still shows what was running); the results of
/// its calls are kept back until all are in, then written together in one transaction.
/// The user's message usually went in with the turn's opening, and the answer goes in
/// with the turn's end, so a turn of n rounds writes 2n + 2 times. A failed write is
/// reported to the engine, which stops the turn and writes nothing more, so the store
/// holds whole rounds, or a last call message with no results at all — which the next
/// turn answers as interrupted before going on.
pub(crate) struct StoreSink {
    store: Arc<dyn Store>,
    pub(crate) conversation: String,
    pub(crate) turn: String,
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
    /// A sink for turn `turn` of `conversation`; `user_stored` says the turn's opening
    /// already wrote the user's message.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        conversation: String,
        turn: String,
        user_stored: bool,
    ) -> Self {
        StoreSink {
            store,
            conversation,
            turn,
            pending: Mutex::new(Round {
                user_stored,
                ..Round::default()
            }),
        }
    }

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
    pub(crate) fn rest(&self) -> Result<CountedHistory, RecordError> {
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
