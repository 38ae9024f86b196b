//! Sends a turn's events to its consumer (and its observer); a consumer that went away
//! never stalls the turn.

use std::sync::Arc;

use buddy_core::{ChatEvent, TurnObserver};
use tokio::sync::mpsc;

/// The sending side of a turn's event stream.
pub(crate) struct Emitter {
    tx: mpsc::Sender<ChatEvent>,
    observer: Option<Arc<dyn TurnObserver>>,
}

impl Emitter {
    pub(crate) fn new(
        tx: mpsc::Sender<ChatEvent>,
        observer: Option<Arc<dyn TurnObserver>>,
    ) -> Self {
        Emitter { tx, observer }
    }

    /// Sends an event, waiting for room (backpressure); a closed receiver is ignored.
    pub(crate) async fn emit(&self, event: ChatEvent) {
        if let Some(observer) = &self.observer {
            observer.event(&event);
        }
        let _ = self.tx.send(event).await;
    }

    /// The raw stream, for a sub-agent's events passed up it (the observer sees them
    /// through the sub-agent's own observer).
    pub(crate) fn sender(&self) -> mpsc::Sender<ChatEvent> {
        self.tx.clone()
    }

    /// The turn's observer, shared, for a sub-agent's to hang under.
    pub(crate) fn observer_arc(&self) -> Option<Arc<dyn TurnObserver>> {
        self.observer.clone()
    }

    /// The turn's observer, if something traces it.
    pub(crate) fn observer(&self) -> Option<&dyn TurnObserver> {
        self.observer.as_deref()
    }
}
