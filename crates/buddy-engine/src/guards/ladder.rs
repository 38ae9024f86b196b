//! The escalation ladder every guard trip feeds: note, then withdraw, then Finalize.
//! Trips on different skills add up, so a model that loops on one tool after another
//! still reaches Finalize after a few; a trip followed by real progress (a round that did
//! something new and learnt something new) no longer counts.

/// What the current trip earns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rung {
    /// Don't run it again (or keep its result) and tell the model, in a note of its own.
    Note = 1,
    /// Withdraw the skill for the rest of the turn.
    Withdraw = 2,
    /// Stop calling tools: Finalize.
    Finalize = 3,
}

/// Clean rounds after which the ladder steps back down one rung, so one slip early in a
/// long legitimate chain is met with a note again rather than a withdrawal. The turn's
/// total of trips never decays.
const DECAY_AFTER_CLEAN_ROUNDS: u32 = 3;

/// One turn's ladder. At most one step per model response, however many of its calls trip.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Ladder {
    level: u8,
    clean_rounds: u32,
    total: u32,
    /// Trips since the latest real progress: what `max_trips` is checked against.
    #[serde(default)]
    counted: u32,
}

impl Ladder {
    /// Records a trip and returns the rung it reaches: Finalize once the turn has had
    /// `max_trips` trips since its latest real progress, whatever skills they were on.
    pub fn step(&mut self, max_trips: u32) -> Rung {
        self.level = (self.level + 1).min(3);
        self.total += 1;
        self.counted += 1;
        self.clean_rounds = 0;
        if self.counted >= max_trips || self.level >= 3 {
            Rung::Finalize
        } else if self.level == 1 {
            Rung::Note
        } else {
            Rung::Withdraw
        }
    }

    /// Records a round with no trip.
    pub fn clean_round(&mut self) {
        self.clean_rounds += 1;
        if self.clean_rounds >= DECAY_AFTER_CLEAN_ROUNDS && self.level > 0 {
            self.level -= 1;
            self.clean_rounds = 0;
        }
    }

    /// Records a round with no trip that made real progress (a new action that brought
    /// a new result): the trips before it no longer count toward the budget, and the
    /// ladder starts again from its first rung.
    pub fn progress(&mut self) {
        self.clean_round();
        self.counted = 0;
        self.level = 0;
        self.clean_rounds = 0;
    }

    /// Trips so far in this turn.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Trips since the latest real progress (those the budget counts).
    pub fn counted(&self) -> u32 {
        self.counted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn climbs_then_stays_at_finalize() {
        let mut l = Ladder::default();
        assert_eq!(l.step(10), Rung::Note);
        assert_eq!(l.step(10), Rung::Withdraw);
        assert_eq!(l.step(10), Rung::Finalize);
        assert_eq!(l.step(10), Rung::Finalize);
    }

    #[test]
    fn decay_lowers_the_rung_but_trips_still_add_up() {
        let mut l = Ladder::default();
        l.step(3);
        for _ in 0..3 {
            l.clean_round();
        }
        assert_eq!(
            l.step(3),
            Rung::Note,
            "one slip long ago is met with a note again"
        );
        assert_eq!(l.total(), 2);
        for _ in 0..3 {
            l.clean_round();
        }
        assert_eq!(
            l.step(3),
            Rung::Finalize,
            "the third trip of the turn finalizes"
        );
    }

    #[test]
    fn trips_followed_by_real_progress_no_longer_count() {
        let mut l = Ladder::default();
        assert_eq!(l.step(3), Rung::Note);
        assert_eq!(l.step(3), Rung::Withdraw);
        l.progress();
        assert_eq!((l.total(), l.counted()), (2, 0));
        assert_eq!(
            l.step(3),
            Rung::Note,
            "a slip after progress is a note again"
        );
        assert_eq!(l.step(3), Rung::Withdraw);
        assert_eq!(
            l.step(3),
            Rung::Finalize,
            "three trips with no progress between"
        );
        assert_eq!(l.total(), 5);
    }
}
