//! Shared server state: the store, the backend, the policy, limits and the shutdown switch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use buddy_engine::PolicyConfig;
use buddy_store::Store;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::ApiKey;
use crate::backend::Backend;
use crate::error::AppError;

/// Operating limits of a server.
#[derive(Clone, Debug)]
pub struct ServerSettings {
    /// Accepted bearer keys; empty means no auth (only allowed on loopback).
    pub api_keys: Vec<ApiKey>,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Turns one key may run at once; more get 429.
    pub max_concurrent_turns_per_key: usize,
    /// How long running turns may go on after a shutdown signal before they are cancelled.
    pub shutdown_grace: Duration,
    /// Whether a request's policy may switch loop detection off (other limits may only
    /// ever be lowered by a request).
    pub allow_loop_detection_off: bool,
    /// Connections served at once; more wait in the listen queue.
    pub max_connections: usize,
    /// Time a client has to send a request's headers (and to start the next request on
    /// a kept-alive connection).
    pub header_timeout: Duration,
    /// Time a client has to send a request's whole body.
    pub body_timeout: Duration,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            api_keys: Vec::new(),
            max_body_bytes: 1024 * 1024,
            max_concurrent_turns_per_key: 8,
            shutdown_grace: Duration::from_secs(30),
            allow_loop_detection_off: false,
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
        }
    }
}

/// Everything the handlers share. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub store: Arc<dyn Store>,
    pub backend: Arc<dyn Backend>,
    pub policy: PolicyConfig,
    pub settings: ServerSettings,
    /// Running turns per key identity.
    pub active: Mutex<HashMap<String, usize>>,
    /// Conversations with a turn running, and that turn's id.
    pub busy: Mutex<HashMap<String, String>>,
    /// Cancelling it cancels every running turn.
    pub shutdown: CancellationToken,
    /// Every running turn, so shutdown can wait for them to be recorded.
    pub turns: TaskTracker,
}

impl AppState {
    /// State over a store, a backend and the policy from buddy.toml.
    pub fn new(
        store: Arc<dyn Store>,
        backend: Arc<dyn Backend>,
        policy: PolicyConfig,
        settings: ServerSettings,
    ) -> Self {
        AppState {
            inner: Arc::new(Inner {
                store,
                backend,
                policy,
                settings,
                active: Mutex::new(HashMap::new()),
                busy: Mutex::new(HashMap::new()),
                shutdown: CancellationToken::new(),
                turns: TaskTracker::new(),
            }),
        }
    }

    /// Cancels every running turn now (they still record `cancelled`).
    pub fn cancel_all(&self) {
        self.inner.shutdown.cancel();
    }

    /// Waits until every running turn has ended and been recorded.
    pub async fn wait_for_turns(&self) {
        self.inner.turns.close();
        self.inner.turns.wait().await;
    }

    /// Takes a turn slot for `key`, or refuses with 429.
    pub(crate) fn take_slot(&self, key: &str) -> Result<Slot, AppError> {
        if self.inner.shutdown.is_cancelled() || self.inner.turns.is_closed() {
            return Err(AppError::ShuttingDown);
        }
        let max = self.inner.settings.max_concurrent_turns_per_key;
        let mut active = self
            .inner
            .active
            .lock()
            .map_err(|_| AppError::Internal("turn counter poisoned".into()))?;
        let running = active.entry(key.to_owned()).or_default();
        if *running >= max {
            return Err(AppError::TooManyTurns(format!(
                "this key already runs {max} turns at once (max_concurrent_turns_per_key); wait for one to finish"
            )));
        }
        *running += 1;
        Ok(Slot {
            state: self.clone(),
            key: key.to_owned(),
        })
    }
}

impl AppState {
    /// Marks `conversation` as running `turn`, or refuses with 409 when a turn already
    /// runs on it: two turns at once would interleave their messages.
    pub(crate) fn lock_conversation(
        &self,
        conversation: &str,
        turn: &str,
    ) -> Result<ConversationLock, AppError> {
        let mut busy = self
            .inner
            .busy
            .lock()
            .map_err(|_| AppError::Internal("conversation locks poisoned".into()))?;
        if let Some(running) = busy.get(conversation) {
            return Err(AppError::Conflict(format!(
                "conversation `{conversation}` already has a turn running ({running}); wait for it to end \
                 (or cancel it by closing its stream), then send the message again"
            )));
        }
        busy.insert(conversation.to_owned(), turn.to_owned());
        Ok(ConversationLock {
            state: self.clone(),
            conversation: conversation.to_owned(),
        })
    }
}

/// A conversation's one running turn, released when dropped.
pub(crate) struct ConversationLock {
    state: AppState,
    conversation: String,
}

impl Drop for ConversationLock {
    fn drop(&mut self) {
        if let Ok(mut busy) = self.state.inner.busy.lock() {
            busy.remove(&self.conversation);
        }
    }
}

/// A running turn's place in its key's quota, given back when dropped.
pub(crate) struct Slot {
    state: AppState,
    key: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut active) = self.state.inner.active.lock()
            && let Some(n) = active.get_mut(&self.key)
        {
            *n = n.saturating_sub(1);
        }
    }
}
