//! Deleting one turn — one Responses API response — and only that turn: what each store
//! does is planned here once, from the conversation's turns in order.

/// What deleting one turn did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnDeletion {
    /// The conversation has no such turn.
    NotFound,
    /// Removed with its messages: it was the conversation's last live turn.
    Removed,
    /// Hidden: later turns were built on its messages, which stay as their context; the
    /// turn itself is gone from every read that names it.
    Hidden,
    /// Removed, and the conversation with it: no live turn was left.
    ConversationGone,
}

/// What a store is to do to delete `turn` of a conversation whose turns are `turns`
/// (id, hidden already), oldest first.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    NotFound,
    /// Mark the turn hidden.
    Hide,
    /// Remove these turns and their messages (the last one, and the hidden ones it
    /// leaves at the end); `conversation` says the conversation goes too.
    Remove {
        turns: Vec<String>,
        conversation: bool,
    },
}

/// Plans the deletion of `turn` among `turns` (id, hidden), oldest first.
pub(crate) fn plan(turns: &[(String, bool)], turn: &str) -> Plan {
    let Some(at) = turns.iter().position(|(id, _)| id == turn) else {
        return Plan::NotFound;
    };
    if turns[at].1 {
        return Plan::NotFound;
    }
    if turns[at + 1..].iter().any(|(_, hidden)| !hidden) {
        return Plan::Hide;
    }
    // The last live turn: it goes, with the hidden turns after it and before it back to
    // the previous live one — nothing is built on them any more.
    let keep = turns[..at].iter().rposition(|(_, hidden)| !hidden);
    let from = keep.map_or(0, |k| k + 1);
    Plan::Remove {
        turns: turns[from..].iter().map(|(id, _)| id.clone()).collect(),
        conversation: keep.is_none(),
    }
}

impl Plan {
    /// What the plan did, once carried out.
    pub(crate) fn outcome(&self) -> TurnDeletion {
        match self {
            Plan::NotFound => TurnDeletion::NotFound,
            Plan::Hide => TurnDeletion::Hidden,
            Plan::Remove {
                conversation: true, ..
            } => TurnDeletion::ConversationGone,
            Plan::Remove { .. } => TurnDeletion::Removed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turns(spec: &[(&str, bool)]) -> Vec<(String, bool)> {
        spec.iter().map(|(id, h)| (id.to_string(), *h)).collect()
    }

    #[test]
    fn a_middle_turn_is_hidden_and_the_last_removed_with_hidden_ones_behind_it() {
        let three = turns(&[("r1", false), ("r2", false), ("r3", false)]);
        assert_eq!(plan(&three, "r2"), Plan::Hide);
        assert_eq!(plan(&three, "nope"), Plan::NotFound);
        assert_eq!(
            plan(&three, "r3"),
            Plan::Remove {
                turns: vec!["r3".into()],
                conversation: false
            }
        );
        let hidden_middle = turns(&[("r1", false), ("r2", true), ("r3", false)]);
        assert_eq!(
            plan(&hidden_middle, "r3"),
            Plan::Remove {
                turns: vec!["r2".into(), "r3".into()],
                conversation: false
            }
        );
        assert_eq!(plan(&hidden_middle, "r2"), Plan::NotFound, "already gone");
        let only_hidden_before = turns(&[("r1", true), ("r2", false)]);
        let gone = plan(&only_hidden_before, "r2");
        assert_eq!(gone.outcome(), TurnDeletion::ConversationGone);
        // Hidden turns after the deleted one do not keep it.
        let hidden_after = turns(&[("r1", false), ("r2", false), ("r3", true)]);
        assert_eq!(
            plan(&hidden_after, "r2"),
            Plan::Remove {
                turns: vec!["r2".into(), "r3".into()],
                conversation: false
            }
        );
    }
}
