//! What a sub-agent call inherits from the turn that makes it: its place in the tree,
//! cancellation, the event stream, the deadline and the policy.

use std::sync::Arc;
use std::time::Instant;

use buddy_core::{ChatEvent, Price, TurnObserver, WaitClock};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::budget::Place;
use crate::policy::LoopPolicy;

tokio::task_local! {
    /// The calling turn of the sub-agent call being polled: set by the machine around each
    /// agent call's future (`Scope::around`), read by the agent skill. Typed, and scoped to
    /// that future: a skill that is no agent never sees it.
    static CALLING_TURN: Arc<Scope>;
}

/// The calling turn, as a sub-agent skill sees it while its call runs.
pub(crate) struct Scope {
    pub place: Place,
    pub cancel: CancellationToken,
    /// The calling turn's event stream: the sub-agent's events go up it.
    pub events: mpsc::Sender<ChatEvent>,
    pub observer: Option<Arc<dyn TurnObserver>>,
    pub deadline: Option<Instant>,
    /// The calling turn's policy, which a sub-agent's declaration refines.
    pub policy: LoopPolicy,
    /// The calling turn's model.
    pub model: String,
    /// What the calling turn's model charges: a sub-agent on the same model is priced
    /// the same (a configured price is not lost on the way down).
    pub price: Option<Price>,
    /// The calling turn's pool of model-call slots: its sub-agents' calls take theirs.
    pub call_slots: Option<crate::CallSlots>,
    /// The operator's price table: a sub-agent on another model or provider is priced
    /// from it, as the calling turn is.
    pub prices: Option<Arc<crate::PriceTable>>,
    /// Where the calling turn records the tasks its calls become: a sub-agent's go there
    /// too, under the agent call ([`super::child_tasks`]).
    pub task_log: Option<Arc<dyn buddy_core::TaskLog>>,
    /// The clock the calling turn's waits run on.
    pub clock: Option<Arc<dyn WaitClock>>,
    /// The calling conversation's latest messages as text, newest last (for declarations
    /// that ask for history).
    pub recent: Vec<String>,
}

impl Scope {
    /// Runs `call` (an agent call's future) with `scope` as its calling turn.
    pub(crate) async fn around<F: std::future::Future>(scope: Arc<Scope>, call: F) -> F::Output {
        CALLING_TURN.scope(scope, call).await
    }

    /// The calling turn of the agent call being polled; `None` outside one.
    pub(crate) fn current() -> Option<Arc<Scope>> {
        CALLING_TURN.try_with(Arc::clone).ok()
    }
}
