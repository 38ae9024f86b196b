//! The byte budget of ended turns' logs kept for reattaching clients
//! (`[server] retained_events_bytes`): a ledger of which ended logs are kept, oldest
//! first, and how many bytes each holds. Past the budget the logs that ended first go
//! first; a client reattaching to one is told it is gone, as after the grace period.

use std::collections::VecDeque;

/// Ended logs kept, in the order they ended, and their bytes in all.
#[derive(Debug)]
pub(crate) struct Retained<K> {
    kept: VecDeque<(K, String, usize)>,
    bytes: usize,
}

impl<K> Default for Retained<K> {
    fn default() -> Self {
        Retained {
            kept: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl<K: Copy + PartialEq> Retained<K> {
    /// Keeps ended log `id` (of kind `kind`, holding `bytes`); returns the logs to forget
    /// so that all kept stay within `budget`, the oldest first.
    pub(crate) fn keep(
        &mut self,
        kind: K,
        id: &str,
        bytes: usize,
        budget: usize,
    ) -> Vec<(K, String)> {
        self.kept.push_back((kind, id.to_owned(), bytes));
        self.bytes += bytes;
        let mut gone = Vec::new();
        while self.bytes > budget {
            let Some((kind, id, bytes)) = self.kept.pop_front() else {
                break;
            };
            self.bytes -= bytes;
            gone.push((kind, id));
        }
        gone
    }

    /// Forgets log `id` (its grace period is over).
    pub(crate) fn forget(&mut self, kind: K, id: &str) {
        if let Some(at) = self.kept.iter().position(|(k, i, _)| *k == kind && i == id)
            && let Some((_, _, bytes)) = self.kept.remove(at)
        {
            self.bytes -= bytes;
        }
    }

    /// The bytes of all kept logs.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// How many logs are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.kept.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_budget_the_logs_that_ended_first_go_first() {
        let mut retained = Retained::default();
        for n in 0..10 {
            assert!(retained.keep(1, &format!("log_{n}"), 100, 1_000).is_empty());
        }
        assert_eq!((retained.len(), retained.bytes()), (10, 1_000));
        let gone = retained.keep(2, "big", 250, 1_000);
        assert_eq!(
            gone,
            [
                (1, "log_0".to_owned()),
                (1, "log_1".to_owned()),
                (1, "log_2".to_owned())
            ]
        );
        assert_eq!((retained.len(), retained.bytes()), (8, 950));
        retained.forget(1, "log_5");
        retained.forget(2, "log_6");
        assert_eq!((retained.len(), retained.bytes()), (7, 850));
        // A log larger than the whole budget is not kept either.
        let gone = retained.keep(1, "huge", 5_000, 1_000);
        assert_eq!(gone.len(), 8);
        assert_eq!((retained.len(), retained.bytes()), (0, 0));
    }
}
