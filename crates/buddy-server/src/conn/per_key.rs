//! How many of one kind of long-lived request (readers of running turns, WebSocket
//! sessions) each key holds, within a cap per key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The count of one kind of hold, per key.
#[derive(Debug)]
pub(crate) struct PerKey {
    cap: usize,
    counts: Mutex<HashMap<String, usize>>,
}

/// One hold of a key; dropping it gives it back.
#[derive(Debug)]
pub(crate) struct Held {
    of: Arc<PerKey>,
    owner: String,
}

impl PerKey {
    /// At most `cap` holds per key.
    pub(crate) fn new(cap: usize) -> Arc<Self> {
        Arc::new(PerKey {
            cap,
            counts: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cap per key.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// A hold for `owner`, or `None` when it holds its cap already.
    pub(crate) fn hold(self: &Arc<Self>, owner: &str) -> Option<Held> {
        let mut counts = self.lock();
        let count = counts.entry(owner.to_owned()).or_default();
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(Held {
            of: Arc::clone(self),
            owner: owner.to_owned(),
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut counts = self.of.lock();
        if let Some(count) = counts.get_mut(&self.owner) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_holds_at_most_its_cap_and_a_release_frees_one() {
        let readers = PerKey::new(2);
        let a = readers.hold("k1").unwrap();
        let _b = readers.hold("k1").unwrap();
        assert!(readers.hold("k1").is_none());
        assert!(readers.hold("k2").is_some(), "another key is counted apart");
        drop(a);
        assert!(readers.hold("k1").is_some());
    }
}
