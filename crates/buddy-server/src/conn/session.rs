//! A WebSocket session's place in the connection table: an upgraded connection stays
//! counted, is shed like any idle connection between responses, and counts against its
//! key's cap of sessions.

use std::sync::Arc;

use super::per_key::Held;
use super::slot::Stage;
use super::table::Admitted;

/// A WebSocket session's hold on its connection's place; dropping it gives both up.
#[derive(Debug)]
pub(crate) struct Session {
    place: Arc<Admitted>,
    _held: Held,
}

/// A response being answered on a session: it is not shed meanwhile.
#[derive(Debug)]
pub(crate) struct Answering {
    place: Arc<Admitted>,
}

impl Session {
    pub(super) fn new(place: Arc<Admitted>, held: Held) -> Self {
        Session { place, _held: held }
    }

    /// Resolves when the table sheds the session to make room for another connection.
    pub(crate) async fn evicted(&self) {
        self.place.slot().evicted().await;
    }

    /// A response starts: the session is busy until the guard is dropped.
    pub(crate) fn answering(&self) -> Answering {
        let slot = self.place.slot();
        slot.request_started();
        slot.body_received();
        Answering {
            place: Arc::clone(&self.place),
        }
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.place.slot().request_ended(Stage::Serving);
    }
}
