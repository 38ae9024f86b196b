//! Writing a turn's messages to the store, a whole round at a time.

use std::sync::{Arc, Mutex};

use buddy_core::{BoxFuture, Message, MessageSink, RecordError, TokenCount};
use buddy_store::{CountedHistory, Store};

/// Writes a turn's messages to the store, two writes per tool round: an assistant
/// message that calls tools goes in at once, before its tools run (so a crash mid-tool
/// still shows what was running), with what was kept back since the last write (buddy's
/// notes); the round's results go in together the moment the last of them is in —
/// before the model is called again, so nothing a tool produced is ever lost to a
/// crash. The user's message usually went in with the turn's opening (else it goes at
/// once), and the answer goes in with the turn's end: with its opening, a turn of n tool
/// rounds writes 2n + 2 times, whatever the calls per round. A crash mid-round loses only the results
/// of calls still running, which the next turn answers as interrupted. A failed write
/// is reported to the engine, which stops the turn and writes nothing more, so the
/// store holds whole rounds, or a last call message with no results at all.
pub(crate) struct StoreSink {
    store: Arc<dyn Store>,
    pub(crate) conversation: String,
    pub(crate) turn: String,
    pending: Mutex<Round>,
}

/// Messages kept back until the next call message or the turn's end, with their token
/// counts.
#[derive(Default)]
struct Round {
    kept: CountedHistory,
    /// The user's message went in with the turn's opening: the engine's record of it,
    /// the turn's first, is already kept.
    user_stored: bool,
    /// Calls of the latest call message still waiting for their result.
    open_calls: usize,
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
            .append_history(&self.conversation, &self.turn, &batch)
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
    /// Keeps `message` back, or writes it with what was kept when it calls tools.
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
                // Stored as made, not as written: a round's results keep the time they
                // came in, so a call's message and its results bound the tool's time.
                round.kept.times_ms.push(unix_ms());
                match message {
                    // The call message goes out now, with what waited for it.
                    Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                        round.open_calls = tool_calls.len();
                        round.take()
                    }
                    // The user's message (when the opening could not take it: it follows
                    // the answers to a crashed turn's calls) is never kept back.
                    Message::User { .. } => round.take(),
                    // The round's last result: the round's results go out together.
                    Message::Tool { .. } => {
                        round.open_calls = round.open_calls.saturating_sub(1);
                        if round.open_calls == 0 {
                            round.take()
                        } else {
                            CountedHistory::default()
                        }
                    }
                    // An answer, a note: with the next call message or the end.
                    _ => CountedHistory::default(),
                }
            };
            self.write(batch).await
        })
    }
}

/// Now, in milliseconds since the Unix epoch.
fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
