//! The judge's sets of token hashes. Hashed sets: a turn reading large results books
//! hundreds of tokens a call, and an ordered set paid a tree walk for each. Written out
//! in ascending order, as the ordered sets they replace were, so a judge memory
//! serialises as it did.

use std::collections::HashSet;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Token hashes (from `guards::tokens`), hashed again with a fast seeded hash.
pub(super) type TokenSet = HashSet<u64, foldhash::fast::RandomState>;

/// Writes `set` as a sequence in ascending order.
pub(super) fn serialize<S: Serializer>(set: &TokenSet, serializer: S) -> Result<S::Ok, S::Error> {
    let mut sorted: Vec<u64> = set.iter().copied().collect();
    sorted.sort_unstable();
    sorted.serialize(serializer)
}

/// Reads a sequence of token hashes.
pub(super) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<TokenSet, D::Error> {
    Ok(Vec::<u64>::deserialize(deserializer)?.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Hashed(#[serde(with = "super")] TokenSet);

    #[test]
    fn a_set_is_written_as_the_ordered_set_was_and_reads_back() {
        let tokens = [u64::MAX, 7, 3, 1 << 40, 0, 7];
        let ordered: BTreeSet<u64> = tokens.into_iter().collect();
        let hashed = Hashed(tokens.into_iter().collect());
        let json = serde_json::to_string(&hashed).expect("serialises");
        assert_eq!(json, serde_json::to_string(&ordered).expect("serialises"));
        let back: Hashed = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back.0, hashed.0);
    }
}
