//! The escalation ladder every loop signal feeds: note, then withdraw, then Finalize.

/// What the current loop signal earns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rung {
    /// Don't run it again; hand back the earlier result (or warn) with a note.
    Note = 1,
    /// Withdraw the skill for the rest of the turn.
    Withdraw = 2,
    /// Stop calling tools: Finalize.
    Finalize = 3,
}

/// Clean rounds after which the ladder steps back down one rung, so one slip early in a
/// long legitimate chain does not count against it forever.
const DECAY_AFTER_CLEAN_ROUNDS: u32 = 3;

/// One turn's ladder. At most one step per model response, however many of its calls loop.
#[derive(Debug, Default)]
pub struct Ladder {
    level: u8,
    clean_rounds: u32,
}

impl Ladder {
    /// Records a loop signal and returns the rung it reaches.
    pub fn step(&mut self) -> Rung {
        self.level = (self.level + 1).min(3);
        self.clean_rounds = 0;
        match self.level {
            1 => Rung::Note,
            2 => Rung::Withdraw,
            _ => Rung::Finalize,
        }
    }

    /// Records a round with no loop signal.
    pub fn clean_round(&mut self) {
        self.clean_rounds += 1;
        if self.clean_rounds >= DECAY_AFTER_CLEAN_ROUNDS && self.level > 0 {
            self.level -= 1;
            self.clean_rounds = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn climbs_then_stays_at_finalize() {
        let mut l = Ladder::default();
        assert_eq!(l.step(), Rung::Note);
        assert_eq!(l.step(), Rung::Withdraw);
        assert_eq!(l.step(), Rung::Finalize);
        assert_eq!(l.step(), Rung::Finalize);
    }

    #[test]
    fn decays_after_clean_rounds() {
        let mut l = Ladder::default();
        l.step();
        l.step();
        for _ in 0..3 {
            l.clean_round();
        }
        assert_eq!(l.step(), Rung::Withdraw);
    }
}
