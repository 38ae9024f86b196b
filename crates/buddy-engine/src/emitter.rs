//! Sends a turn's events to its consumer; a consumer that went away never stalls the turn.

use buddy_core::ChatEvent;
use tokio::sync::mpsc;

/// The sending side of a turn's event stream.
pub(crate) struct Emitter {
    tx: mpsc::Sender<ChatEvent>,
}

impl Emitter {
    pub(crate) fn new(tx: mpsc::Sender<ChatEvent>) -> Self {
        Emitter { tx }
    }

    /// Sends an event, waiting for room (backpressure); a closed receiver is ignored.
    pub(crate) async fn emit(&self, event: ChatEvent) {
        let _ = self.tx.send(event).await;
    }
}
