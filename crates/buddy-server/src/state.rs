//! Shared server state: the store, the backend, the policy, limits and the shutdown switch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use buddy_engine::PolicyConfig;
use buddy_store::Store;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::backend::Backend;
use crate::error::AppError;

/// Operating limits of a server.
#[derive(Clone, Debug)]
pub struct ServerSettings {
    /// Accepted bearer keys; empty means no auth (only allowed on loopback).
    pub api_keys: Vec<String>,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Turns one key may run at once; more get 429.
    pub max_concurrent_turns_per_key: usize,
    /// How long running turns may go on after a shutdown signal before they are cancelled.
    pub shutdown_grace: Duration,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            api_keys: Vec::new(),
            max_body_bytes: 1024 * 1024,
            max_concurrent_turns_per_key: 8,
            shutdown_grace: Duration::from_secs(30),
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
    /// Running turns per key.
    pub active: Mutex<HashMap<String, usize>>,
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
