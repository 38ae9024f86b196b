//! The statements that remove or copy messages outside a turn's writes, each keeping
//! its key's count of stored bytes (`buddy_owner_turns.bytes`, what the storage quota
//! reads) in the same statement; the turn's own writes keep it in `writes`, and a turn
//! its instance's crash ended is counted by the sweep (`SWEEP_PENDING`).

/// Adds bytes to keys' counts: `$rows` is a query of `(owner, running, bytes)` rows (a
/// key's row made with it when it has none: running 0). The one way every statement of
/// the store adds to the count.
macro_rules! add_to_keys {
    ($($rows:tt)*) => {
        concat!(
            "INSERT INTO buddy_owner_turns (owner, running, bytes)\n",
            $($rows)*,
            "\nON CONFLICT (owner) DO UPDATE SET bytes = buddy_owner_turns.bytes + EXCLUDED.bytes"
        )
    };
}

/// Removes the messages of conversation `$1` that `$which` picks, taking their bytes off
/// its key's count; the row back is how many went.
macro_rules! remove_messages {
    ($which:literal) => {
        concat!(
            "WITH gone AS (
    DELETE FROM buddy_messages WHERE conversation_id = $1 AND ",
            $which,
            "
    RETURNING octet_length(body) AS bytes
), freed AS (
    UPDATE buddy_owner_turns SET bytes = bytes - (SELECT COALESCE(SUM(bytes), 0) FROM gone)
    WHERE owner = (SELECT owner FROM buddy_conversations WHERE id = $1)
)
SELECT COUNT(*) FROM gone"
        )
    };
}

/// Removes the messages numbered `$2` of conversation `$1`.
pub(super) const REMOVE_MESSAGES: &str = remove_messages!("seq = ANY($2)");

/// Removes the messages of turns `$2` of conversation `$1`.
pub(super) const REMOVE_TURN_MESSAGES: &str = remove_messages!("turn_id = ANY($2)");

/// Deletes conversation `$1` (its messages and turns go with it) and takes its messages'
/// bytes off its key's count, less those of a turn not yet counted (`pending`; the sum
/// reads the messages as they were before the statement); the row back is how many
/// conversations went.
pub(super) const DELETE_CONVERSATION: &str = "WITH gone AS (
    DELETE FROM buddy_conversations WHERE id = $1 RETURNING owner, pending
), freed AS (
    UPDATE buddy_owner_turns
    SET bytes = bytes + (SELECT pending FROM gone)
        - (SELECT COALESCE(SUM(octet_length(body)), 0) FROM buddy_messages WHERE conversation_id = $1)
    WHERE owner IN (SELECT owner FROM gone)
)
SELECT COUNT(*) FROM gone";

/// Copies the first `$3` messages of conversation `$2` into the fork `$1` of key `$4`,
/// adding their bytes to that key's count.
pub(super) const COPY_MESSAGES: &str = concat!(
    "WITH copied AS (
    INSERT INTO buddy_messages (conversation_id, seq, turn_id, role, body, created_at_ms, tokens, token_encoding)
    SELECT $1, seq, turn_id, role, body, created_at_ms, tokens, token_encoding FROM buddy_messages
    WHERE conversation_id = $2 ORDER BY seq LIMIT $3
    RETURNING octet_length(body) AS bytes
)
",
    add_to_keys!("SELECT $4, 0, SUM(bytes) FROM copied HAVING COUNT(*) > 0")
);

/// The pending bytes of conversations `$1`, whose turns a sweep just ended (their
/// instance died: it writes no more, and no new turn can claim them before the sweep
/// frees their claims), added to their keys' counts. A statement of its own, after the
/// one that ends the turns: one statement locking both tables would take them in the
/// other order than an instance applying the schema, and deadlock with it.
pub(super) const SWEEP_PENDING: &str = concat!(
    "WITH prior AS (
    SELECT id, owner, pending FROM buddy_conversations WHERE id = ANY($1) AND pending <> 0
), cleared AS (
    UPDATE buddy_conversations c SET pending = 0 FROM prior WHERE c.id = prior.id
)
",
    add_to_keys!("SELECT owner, 0, SUM(pending) FROM prior GROUP BY owner")
);

/// Turn `$1`'s end (`$2` the time, `$3`–`$6` stop reason, stats, error, tape) as the
/// step-by-step `finish_turn` records it, its conversation's pending bytes added to its
/// key's count (the conversation read first: tables in the order every write takes them).
pub(super) const FINISH_BY_ID: &str = concat!(
    "WITH prior AS (
    SELECT c.id, c.owner, c.pending FROM buddy_conversations c
    WHERE c.id = (SELECT conversation_id FROM buddy_turns WHERE id = $1)
), cleared AS (
    UPDATE buddy_conversations c SET pending = 0 FROM prior WHERE c.id = prior.id AND prior.pending <> 0
), finish AS (
    UPDATE buddy_turns SET finished_at_ms = $2, stop_reason = $3, stats = $4, error = $5, tape = $6
    WHERE id = $1
)
",
    add_to_keys!("SELECT owner, 0, pending FROM prior WHERE pending <> 0")
);
