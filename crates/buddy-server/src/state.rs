//! Shared server state: the store, the backend, the policy, the settings, running turns
//! and the shutdown switch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use buddy_engine::PolicyConfig;
use buddy_store::{Claim, ClaimError, Coordinator, LocalCoordinator, Store, TurnOpening};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::backend::Backend;
use crate::error::AppError;
use crate::item_cache::ItemCache;
use crate::retained_logs::Retained;
use crate::settings::ServerSettings;
use crate::turn_log::{LogKind, Logs};

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
    /// Which turns run, over every instance sharing the store.
    pub coordinator: Arc<dyn Coordinator>,
    /// The turns running in this process: their cancel switch and owner.
    pub local: Mutex<HashMap<String, LocalTurn>>,
    /// Cancelling it cancels every running turn.
    pub shutdown: CancellationToken,
    /// Every running turn, so shutdown can wait for them to be recorded.
    pub turns: TaskTracker,
    /// The events of running and recently ended turns, by turn (and response) id.
    pub logs: Logs,
    /// Which ended logs `logs` keeps, within `retained_events_bytes`.
    pub ended_logs: Mutex<Retained<LogKind>>,
    /// WebSocket sessions of `/v1/responses` open at once (`max_connections`), also when
    /// the router runs without `serve`'s connection table, which counts them too.
    pub websockets: Arc<tokio::sync::Semaphore>,
    /// Responses' output items, for clients that send them back by reference.
    pub items: Arc<ItemCache>,
    /// Each key's pool of model calls in flight (`max_model_calls_in_flight_per_key`).
    pub call_slots: Mutex<HashMap<String, buddy_engine::CallSlots>>,
}

/// A turn running in this process.
pub(crate) struct LocalTurn {
    pub cancel: CancellationToken,
    pub owner: String,
    /// Where the person answers the turn's tool questions (MCP elicitation).
    pub desk: Arc<buddy_engine::ElicitationDesk>,
}

impl AppState {
    /// State over a store, a backend and the policy from buddy.toml, for one process.
    pub fn new(
        store: Arc<dyn Store>,
        backend: Arc<dyn Backend>,
        policy: PolicyConfig,
        settings: ServerSettings,
    ) -> Self {
        Self::shared(
            store,
            Arc::new(LocalCoordinator::default()),
            backend,
            policy,
            settings,
        )
    }

    /// State whose running turns are coordinated with other instances (one PostgreSQL).
    /// Must be called inside the runtime: it listens for cancels sent by other instances.
    pub fn shared(
        store: Arc<dyn Store>,
        coordinator: Arc<dyn Coordinator>,
        backend: Arc<dyn Backend>,
        policy: PolicyConfig,
        settings: ServerSettings,
    ) -> Self {
        let mut cancels = coordinator.cancellations();
        let settings = settings.normalized();
        let websockets = Arc::new(tokio::sync::Semaphore::new(settings.max_connections));
        let state = AppState {
            inner: Arc::new(Inner {
                store,
                backend,
                policy,
                settings,
                coordinator,
                local: Mutex::new(HashMap::new()),
                logs: Logs::default(),
                ended_logs: Mutex::default(),
                websockets,
                items: Arc::default(),
                call_slots: Mutex::default(),
                shutdown: CancellationToken::new(),
                turns: TaskTracker::new(),
            }),
        };
        let weak = Arc::downgrade(&state.inner);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                while let Some(turn) = cancels.recv().await {
                    let Some(inner) = weak.upgrade() else { break };
                    if let Ok(local) = inner.local.lock()
                        && let Some(running) = local.get(&turn)
                    {
                        tracing::info!(%turn, "cancelled at another instance's request");
                        running.cancel.cancel();
                    }
                }
            });
            state.prune_kept_events_every_minute();
            state.copy_logs_when_asked();
            state.take_postings();
        }
        state
    }

    /// `owner`'s pool of model calls in flight, shared by all its turns, sub-agents,
    /// sampling calls and compactions in this process.
    pub(crate) fn call_slots(&self, owner: &str) -> buddy_engine::CallSlots {
        let max = self.inner.settings.max_model_calls_in_flight_per_key;
        let mut pools = self
            .inner
            .call_slots
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        pools
            .entry(owner.to_owned())
            .or_insert_with(|| buddy_engine::CallSlots::new(max))
            .clone()
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

    /// Claims a turn: its conversation must be free (409) and its key below its cap
    /// (429), over every instance.
    pub(crate) async fn claim(
        &self,
        turn_id: &str,
        conversation_id: Option<&str>,
        owner: &str,
        cancel: &CancellationToken,
    ) -> Result<TurnLease, AppError> {
        let claim = self.new_claim(turn_id, conversation_id, owner)?;
        self.inner
            .coordinator
            .claim(&claim)
            .await
            .map_err(refused)?;
        Ok(self.lease(turn_id, owner, cancel))
    }

    /// Writes a turn's opening on a new conversation and claims the turn on it (one
    /// write where the store keeps the claims): the conversation's id and the claim, or
    /// why not (429 at the key's cap), with nothing kept.
    pub(crate) async fn open_claimed(
        &self,
        opening: TurnOpening<'_>,
        cancel: &CancellationToken,
    ) -> Result<(String, TurnLease), AppError> {
        let claim = self.new_claim(opening.turn, None, opening.owner)?;
        let store = &*self.inner.store;
        let id = self
            .inner
            .coordinator
            .open_claimed(store, opening, &claim)
            .await
            .map_err(refused)?;
        Ok((id, self.lease(opening.turn, opening.owner, cancel)))
    }

    /// A claim for a turn of `owner`, unless the server is shutting down.
    fn new_claim(
        &self,
        turn_id: &str,
        conversation_id: Option<&str>,
        owner: &str,
    ) -> Result<Claim, AppError> {
        if self.inner.shutdown.is_cancelled() || self.inner.turns.is_closed() {
            return Err(AppError::ShuttingDown);
        }
        Ok(Claim {
            turn_id: turn_id.to_owned(),
            conversation_id: conversation_id.map(str::to_owned),
            owner: owner.to_owned(),
            max_per_owner: self.inner.settings.max_concurrent_turns_per_key,
        })
    }

    /// A claimed turn, recorded as running in this process.
    fn lease(&self, turn_id: &str, owner: &str, cancel: &CancellationToken) -> TurnLease {
        let desk = Arc::new(buddy_engine::ElicitationDesk::new());
        if let Ok(mut local) = self.inner.local.lock() {
            local.insert(
                turn_id.to_owned(),
                LocalTurn {
                    cancel: cancel.clone(),
                    owner: owner.to_owned(),
                    desk: Arc::clone(&desk),
                },
            );
        }
        TurnLease {
            state: self.clone(),
            turn_id: Some(turn_id.to_owned()),
            desk,
        }
    }

    /// The elicitation desk of a turn of `owner` (any owner for `None`) running in this
    /// process; `None` when there is no such turn here.
    pub(crate) fn elicitation_desk(
        &self,
        turn_id: &str,
        owner: Option<&str>,
    ) -> Option<Arc<buddy_engine::ElicitationDesk>> {
        let local = self.inner.local.lock().ok()?;
        local
            .get(turn_id)
            .filter(|t| owner.is_none_or(|o| o == t.owner))
            .map(|t| Arc::clone(&t.desk))
    }

    /// Drops a turn from this process's running turns.
    fn forget(&self, turn: &str) {
        if let Ok(mut local) = self.inner.local.lock() {
            local.remove(turn);
        }
    }

    /// Cancels a running turn of `owner` (any owner for `None`), here or on another
    /// instance; `false` when there is no such turn.
    pub(crate) async fn cancel_turn(
        &self,
        turn_id: &str,
        owner: Option<&str>,
    ) -> Result<bool, AppError> {
        let here = self.inner.local.lock().ok().and_then(|local| {
            local
                .get(turn_id)
                .filter(|t| owner.is_none_or(|o| o == t.owner))
                .map(|t| t.cancel.clone())
        });
        if let Some(cancel) = here {
            cancel.cancel();
            return Ok(true);
        }
        Ok(self
            .inner
            .coordinator
            .request_cancel(turn_id, owner)
            .await?)
    }
}

/// Why a claim was refused, as the client hears it.
fn refused(e: ClaimError) -> AppError {
    match e {
        ClaimError::ConversationBusy {
            conversation,
            running,
        } => AppError::Conflict(format!(
            "conversation `{conversation}` already has a turn running ({running}); wait for it to end \
             (or cancel it: POST /v1/turns/{running}/cancel), then send the message again"
        )),
        ClaimError::OwnerAtCap { max } => AppError::TooManyTurns(format!(
            "this key already runs {max} turns at once (max_concurrent_turns_per_key); wait for one to finish"
        )),
        ClaimError::Store(e) => AppError::from(e),
    }
}

/// A running turn's claim, released by [`TurnLease::release`] (or, failing that, when
/// dropped).
pub(crate) struct TurnLease {
    state: AppState,
    turn_id: Option<String>,
    /// The turn's elicitation desk (answered by `POST /v1/turns/{id}/elicitations/{eid}`).
    pub(crate) desk: Arc<buddy_engine::ElicitationDesk>,
}

impl TurnLease {
    /// Frees the turn after it was closed in the store (`closed`: that write succeeded):
    /// where the store keeps this coordinator's claims, the closing ended the claim
    /// already and only this process's record of the turn goes; else as [`Self::release`].
    pub async fn release_closed(mut self, closed: bool) {
        let inner = &self.state.inner;
        let claims = inner.store.claims_of();
        if closed && claims.is_some() && claims == inner.coordinator.instance() {
            if let Some(turn) = self.turn_id.take() {
                self.state.forget(&turn);
            }
            return;
        }
        self.release().await;
    }

    /// Frees the turn's conversation and its place in the key's quota.
    pub async fn release(mut self) {
        if let Some(turn) = self.turn_id.take() {
            self.state.forget(&turn);
            if let Err(e) = self.state.inner.coordinator.release(&turn).await {
                tracing::error!(%turn, error = %e, "turn claim not released");
            }
        }
    }
}

impl Drop for TurnLease {
    fn drop(&mut self) {
        if let Some(turn) = self.turn_id.take() {
            self.state.forget(&turn);
            let coordinator = Arc::clone(&self.state.inner.coordinator);
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = coordinator.release(&turn).await;
                });
            }
        }
    }
}
