//! Model calls in flight at once, bounded across turns: one pool of slots (a server
//! gives each key one) that every model call of a turn, of its sub-agents and of the
//! MCP sampling its tools ask for takes a slot of while it streams.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A pool of model-call slots, shared by every turn that is given it (cheap to clone).
#[derive(Clone, Debug)]
pub struct CallSlots {
    slots: Arc<Semaphore>,
    max: usize,
    /// Where each call reserves its worst case of the key's money first (a turn's own).
    ledger: Option<Arc<dyn crate::CallLedger>>,
}

impl CallSlots {
    /// A pool of `max` slots (0 counts as 1).
    pub fn new(max: usize) -> Self {
        let max = max.max(1);
        CallSlots {
            slots: Arc::new(Semaphore::new(max)),
            max,
            ledger: None,
        }
    }

    /// The same pool, whose calls reserve their worst case in `ledger` before they start
    /// and settle it after (one turn's: the pool stays shared).
    pub fn with_ledger(&self, ledger: Arc<dyn crate::CallLedger>) -> Self {
        CallSlots {
            ledger: Some(ledger),
            ..self.clone()
        }
    }

    /// The ledger the pool's calls reserve in, if any.
    pub fn ledger(&self) -> Option<&Arc<dyn crate::CallLedger>> {
        self.ledger.as_ref()
    }

    /// How many calls the pool lets run at once.
    pub fn max(&self) -> usize {
        self.max
    }

    /// How many calls run now.
    pub fn in_flight(&self) -> usize {
        self.max.saturating_sub(self.slots.available_permits())
    }

    /// Waits for a free slot; it is freed when the returned permit is dropped. `None`
    /// only were the pool closed, which it never is (the call then goes on unbounded
    /// rather than failing the turn).
    pub async fn take(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.slots).acquire_owned().await.ok()
    }

    /// A slot if one is free now.
    pub fn try_take(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.slots).try_acquire_owned().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_pool_lets_max_calls_run_and_frees_a_slot_when_a_call_ends() {
        let pool = CallSlots::new(2);
        let a = pool.take().await;
        let _b = pool.take().await;
        assert_eq!(pool.in_flight(), 2);
        assert!(pool.try_take().is_none(), "a third call waits");
        drop(a);
        assert!(pool.try_take().is_some());
        assert_eq!(CallSlots::new(0).max(), 1, "0 counts as 1");
    }
}
