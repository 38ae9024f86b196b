//! What a turn has run so far, indexed for the repetition, cycle and near-duplicate checks.

use std::collections::HashMap;

/// One executed tool call and what it returned (before buddy's notes).
#[derive(Clone, Debug)]
pub struct CallRecord {
    pub name: String,
    pub key: String,
    pub canonical_args: String,
    pub result: String,
    pub is_error: bool,
    /// How many times in a row a pollable call with these arguments returned this same result.
    pub unchanged_polls: u32,
}

/// The executed calls of a turn, in order.
#[derive(Debug, Default)]
pub struct CallLog {
    records: Vec<CallRecord>,
    last_by_key: HashMap<String, usize>,
    last_by_name: HashMap<String, usize>,
}

/// The identity of a call for repetition checks: skill name plus canonical arguments.
pub fn call_key(name: &str, canonical_args: &str) -> String {
    format!("{name}\u{1f}{canonical_args}")
}

impl CallLog {
    /// Appends an executed call.
    pub fn push(&mut self, record: CallRecord) {
        let i = self.records.len();
        self.last_by_key.insert(record.key.clone(), i);
        self.last_by_name.insert(record.name.clone(), i);
        self.records.push(record);
    }

    /// The latest call with exactly this key.
    pub fn last_with_key(&self, key: &str) -> Option<&CallRecord> {
        self.last_by_key.get(key).and_then(|i| self.records.get(*i))
    }

    /// The latest call of this skill.
    pub fn last_of(&self, name: &str) -> Option<&CallRecord> {
        self.last_by_name.get(name).and_then(|i| self.records.get(*i))
    }

    /// If repeating `key` now closes a cycle of period 2..=4 (A,B,A or A,B,C,A…), its period.
    pub fn cycle_period(&self, key: &str) -> Option<usize> {
        let last = *self.last_by_key.get(key)?;
        let period = self.records.len() - last;
        let between_distinct = self.records[last + 1..].iter().all(|r| r.key != key);
        ((2..=4).contains(&period) && between_distinct).then_some(period)
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
            name: name.into(),
            key: call_key(name, args),
            canonical_args: args.into(),
            result: "r".into(),
            is_error: false,
            unchanged_polls: 0,
        }
    }

    #[test]
    fn finds_cycles_of_period_two_to_four() {
        let mut log = CallLog::default();
        log.push(rec("a", "{}"));
        assert_eq!(log.cycle_period(&call_key("a", "{}")), None, "an immediate repeat is no cycle");
        log.push(rec("b", "{}"));
        assert_eq!(log.cycle_period(&call_key("a", "{}")), Some(2));
        log.push(rec("c", "{}"));
        log.push(rec("d", "{}"));
        log.push(rec("e", "{}"));
        assert_eq!(log.cycle_period(&call_key("a", "{}")), None, "period 5 is too long");
        assert_eq!(log.cycle_period(&call_key("c", "{}")), Some(3));
        assert_eq!(log.last_of("b").map(|r| r.key.clone()), Some(call_key("b", "{}")));
    }
}
