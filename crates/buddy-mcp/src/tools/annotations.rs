//! MCP tool annotations → buddy's repeat semantics.
//!
//! | annotations | semantics |
//! |---|---|
//! | `readOnlyHint` and `idempotentHint` | `pure`: a repeat may be answered from the earlier result |
//! | `readOnlyHint` alone | `observed`: a repeat runs, judged by its result |
//! | not read-only, `destructiveHint` true or absent (the spec's default) | `effectful`: never silently re-run |
//! | not read-only, `destructiveHint: false` | `observed` |
//!
//! A `semantics` set for the tool in buddy.toml beats all of these.

use buddy_core::RepeatSemantics;
use serde_json::Value;

/// The semantics of a tool with these annotations (the `annotations` object of
/// `tools/list`, or `None` when it has none).
pub fn semantics_of(annotations: Option<&Value>) -> RepeatSemantics {
    let hint = |name: &str| {
        annotations
            .and_then(|a| a.get(name))
            .and_then(Value::as_bool)
    };
    let read_only = hint("readOnlyHint").unwrap_or(false);
    if read_only {
        return if hint("idempotentHint").unwrap_or(false) {
            RepeatSemantics::Pure
        } else {
            RepeatSemantics::Observed
        };
    }
    if hint("destructiveHint").unwrap_or(true) {
        RepeatSemantics::Effectful
    } else {
        RepeatSemantics::Observed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_mapping_follows_the_table() {
        let of = |v: Value| semantics_of(Some(&v));
        assert_eq!(
            of(json!({"readOnlyHint": true, "idempotentHint": true})),
            RepeatSemantics::Pure
        );
        assert_eq!(of(json!({"readOnlyHint": true})), RepeatSemantics::Observed);
        assert_eq!(of(json!({})), RepeatSemantics::Effectful);
        assert_eq!(semantics_of(None), RepeatSemantics::Effectful);
        assert_eq!(
            of(json!({"destructiveHint": false})),
            RepeatSemantics::Observed
        );
        assert_eq!(
            of(json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true})),
            RepeatSemantics::Effectful
        );
    }
}
