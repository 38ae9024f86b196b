//! What a turn has run so far, indexed for the repetition, cycle and near-duplicate checks.

use std::collections::{BTreeSet, HashMap};

/// The call log's indexes are looked up and added to on every call; their keys are the
/// turn's own, so a fast seeded hash does where SipHash's strength is not needed.
type Index = HashMap<String, usize, foldhash::fast::RandomState>;

use buddy_core::Evidence;
use serde::{Deserialize, Serialize};

/// One executed tool call and what it returned, exactly as the skill returned it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    pub call_id: String,
    pub name: String,
    pub key: String,
    /// The start of the arguments as the model sent them (for evidence).
    pub arguments: String,
    pub canonical_args: String,
    /// String values of the arguments, longest first (see `similarity::arg_strings`).
    pub arg_strings: Vec<String>,
    pub result: String,
    /// The information of the result: less its echo of the arguments, less its noise.
    pub fingerprint: u64,
    pub is_error: bool,
    /// The model response (round) the call came in, from 1.
    pub round: u32,
    /// How many times in a row a call with these arguments returned nothing it had not
    /// returned before, with no new action of the turn in between.
    pub unchanged: u32,
    /// Distinct actions (skill and arguments) the turn had run once this call was booked:
    /// a repeat after new actions is the model checking again, not going round.
    #[serde(default)]
    pub actions_at: u32,
}

impl CallRecord {
    /// This call and its result, as a guard event shows it.
    pub fn evidence(&self) -> Evidence {
        Evidence::new(&self.call_id, &self.name, &self.arguments, &self.result)
    }
}

/// The executed calls of a turn, in order.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CallLog {
    records: Vec<CallRecord>,
    /// Keys of every call the model asked for, run or not, for cycle detection.
    requested: Vec<String>,
    last_by_key: Index,
    last_by_name: Index,
}

/// The identity of a call for repetition checks: skill name plus canonical arguments.
pub fn call_key(name: &str, canonical_args: &str) -> String {
    format!("{name}\u{1f}{canonical_args}")
}

impl CallLog {
    /// Appends an executed call (its `actions_at` is set here).
    pub fn push(&mut self, mut record: CallRecord) {
        let i = self.records.len();
        self.last_by_key.insert(record.key.clone(), i);
        record.actions_at = self.actions();
        match self.last_by_name.get_mut(&record.name) {
            Some(last) => *last = i,
            None => {
                self.last_by_name.insert(record.name.clone(), i);
            }
        }
        self.records.push(record);
    }

    /// The latest call with exactly this key.
    pub fn last_with_key(&self, key: &str) -> Option<&CallRecord> {
        self.last_by_key.get(key).and_then(|i| self.records.get(*i))
    }

    /// The latest call of this skill.
    pub fn last_of(&self, name: &str) -> Option<&CallRecord> {
        self.last_by_name
            .get(name)
            .and_then(|i| self.records.get(*i))
    }

    /// The latest call of this skill made in a round before `round`.
    pub fn last_of_before_round(&self, name: &str, round: u32) -> Option<&CallRecord> {
        let latest = *self.last_by_name.get(name)?;
        self.records[..=latest]
            .iter()
            .rev()
            .find(|r| r.name == name && r.round < round)
    }

    /// The earlier call with this key (same skill, same arguments) that got the same
    /// information back (`fingerprint`, and success or failure alike), if there is one.
    pub fn seen_for_key(&self, key: &str, is_error: bool, fingerprint: u64) -> Option<&CallRecord> {
        self.records
            .iter()
            .rev()
            .find(|r| r.key == key && r.is_error == is_error && r.fingerprint == fingerprint)
    }

    /// What every earlier call with this key got back: (is an error, fingerprint).
    pub fn results_for_key(&self, key: &str) -> Vec<(bool, u64)> {
        self.records
            .iter()
            .filter(|r| r.key == key)
            .map(|r| (r.is_error, r.fingerprint))
            .collect()
    }

    /// The earlier call of skill `name` (any arguments) that got the same information
    /// back, if there is one.
    pub fn seen_for_skill(
        &self,
        name: &str,
        is_error: bool,
        fingerprint: u64,
    ) -> Option<&CallRecord> {
        self.records
            .iter()
            .rev()
            .find(|r| r.name == name && r.is_error == is_error && r.fingerprint == fingerprint)
    }

    /// Notes that the model asked for a call (whether or not it runs).
    pub fn note_requested(&mut self, key: &str) {
        self.requested.push(key.to_owned());
    }

    /// If asking for `key` now closes a cycle of period 2..=4 (A,B,A or A,B,C,A…) in
    /// the calls the model asked for, its period.
    pub fn cycle_period(&self, key: &str) -> Option<usize> {
        let last = self.requested.iter().rposition(|k| k == key)?;
        let period = self.requested.len() - last;
        (2..=4).contains(&period).then_some(period)
    }

    /// The skills taking part in the cycle `key` closes (see [`CallLog::cycle_period`]).
    pub fn cycle_members(&self, key: &str) -> Vec<String> {
        let Some(period) = self.cycle_period(key) else {
            return Vec::new();
        };
        let mut names: Vec<String> = self.requested[self.requested.len() - period..]
            .iter()
            .filter_map(|k| k.split('\u{1f}').next())
            .map(str::to_owned)
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The calls executed since the latest one with `key` (none when it never ran).
    fn since(&self, key: &str) -> &[CallRecord] {
        self.last_by_key
            .get(key)
            .and_then(|i| self.records.get(i + 1..))
            .unwrap_or_default()
    }

    /// True when calls ran since the latest one with `key` and none of them brought
    /// anything new (each returned what it had returned before): a cycle going round.
    pub fn nothing_new_since(&self, key: &str) -> bool {
        let since = self.since(key);
        !since.is_empty() && since.iter().all(|r| r.unchanged > 0)
    }

    /// True when a call since the latest one with `key` has a key in `signalled`.
    pub fn signalled_since(&self, key: &str, signalled: &BTreeSet<String>) -> bool {
        self.since(key).iter().any(|r| signalled.contains(&r.key))
    }

    /// Distinct actions (skill and canonical arguments) executed so far.
    pub fn actions(&self) -> u32 {
        u32::try_from(self.last_by_key.len()).unwrap_or(u32::MAX)
    }

    /// Number of executed calls.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True before any call ran.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Every executed call, oldest first.
    pub fn records(&self) -> &[CallRecord] {
        &self.records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str, args: &str) -> CallRecord {
        CallRecord {
            call_id: "c".into(),
            name: name.into(),
            key: call_key(name, args),
            arguments: args.into(),
            canonical_args: args.into(),
            arg_strings: Vec::new(),
            result: "r".into(),
            fingerprint: 0,
            is_error: false,
            round: 1,
            unchanged: 0,
            actions_at: 0,
        }
    }

    #[test]
    fn finds_cycles_of_period_two_to_four() {
        let mut log = CallLog::default();
        let key = |n: &str| call_key(n, "{}");
        log.push(rec("a", "{}"));
        log.note_requested(&key("a"));
        assert_eq!(
            log.cycle_period(&key("a")),
            None,
            "an immediate repeat is no cycle"
        );
        for name in ["b", "c", "d", "e"] {
            log.note_requested(&key(name));
        }
        assert_eq!(log.cycle_period(&key("a")), None, "period 5 is too long");
        assert_eq!(log.cycle_period(&key("c")), Some(3));
        log.note_requested(&key("b"));
        assert_eq!(log.cycle_period(&key("e")), Some(2));
        assert_eq!(
            log.cycle_members(&key("e")),
            vec!["b".to_owned(), "e".to_owned()]
        );
        assert_eq!(log.last_of("a").map(|r| r.key.clone()), Some(key("a")));
        assert!(log.last_of("b").is_none(), "requested is not executed");
    }
}
