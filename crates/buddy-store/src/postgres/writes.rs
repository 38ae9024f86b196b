//! The statements that write a turn: its opening, each round, its end — each one round
//! trip, atomic by itself.

use buddy_core::{Message, TokenCount};
use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;

use super::rows::backend;
use crate::body::message_json;
use crate::columns::{count_columns, now_ms, role};
use crate::error::StoreError;

/// The messages' bytes (`$5`, their JSON), as the storage quota counts them.
macro_rules! bytes_of_messages {
    () => {
        "(SELECT COALESCE(SUM(octet_length(b)), 0) FROM UNNEST($5::TEXT[]) AS b)"
    };
}

/// The end of every append: the messages (`$4`–`$7`, with the conversation `$1` and the
/// turn `$3`; the times they were made the statement's last parameter, named here)
/// numbered after `conv.base`, and that base sent back (no row back: no such
/// conversation).
macro_rules! add_messages {
    ($times:literal) => {
        concat!(
            ", added AS (
    INSERT INTO buddy_messages (conversation_id, seq, turn_id, role, body, created_at_ms, tokens, token_encoding)
    SELECT $1, conv.base + m.n, $3, m.role, m.body, m.at, m.tokens, m.encoding
    FROM conv, UNNEST($4::TEXT[], $5::TEXT[], $6::BIGINT[], $7::TEXT[], ",
            $times,
            "::BIGINT[])
        WITH ORDINALITY AS m(role, body, tokens, encoding, at, n)
)
SELECT base FROM conv"
        )
    };
}

/// The conversation `$1`'s row, locked, moved to time `$2`, with room for the messages
/// `$4`: `conv.base` is the number before the first of them, `conv.owner` its key. An
/// argument adds to what the update sets.
macro_rules! lock_conversation {
    () => {
        lock_conversation!("")
    };
    ($($also:tt)*) => {
        concat!(
            "WITH conv AS (
    UPDATE buddy_conversations SET updated_at_ms = $2, last_seq = last_seq + cardinality($4::TEXT[])",
            $($also)*,
            "
    WHERE id = $1
    RETURNING last_seq - cardinality($4::TEXT[]) AS base, owner
)"
        )
    };
}

/// A turn's writes wait in its conversation's `pending` bytes (the row each write
/// updates anyway) and go into the key's count when the turn ends: the count is one row
/// per key, which every write of every parallel turn of that key would otherwise wait on.
macro_rules! add_pending {
    () => {
        concat!(",\n        pending = pending + ", bytes_of_messages!())
    };
}

/// The turn's record (`$8` the model, `$9` the instance), in an opening.
macro_rules! add_turn {
    () => {
        ", turn AS (
    INSERT INTO buddy_turns (id, conversation_id, model, instance, started_at_ms)
    SELECT $3, $1, $8, $9, $2 FROM conv
)"
    };
}

/// Messages written outside a turn (a client's items) in one statement: numbered as a
/// round's are, their bytes added to their key's count at once. `$8`: their times.
pub(super) const APPEND_MESSAGES: &str = concat!(
    lock_conversation!(),
    ", counted AS (\n",
    add_to_keys!(
        "SELECT conv.owner, 0, ",
        bytes_of_messages!(),
        " FROM conv WHERE cardinality($5::TEXT[]) > 0"
    ),
    "\n)",
    add_messages!("$8")
);

/// A round's messages in one statement (one round trip, atomic by itself): the
/// conversation's row is locked and its `last_seq` moved past them, which numbers them
/// in order even when two appends race; their bytes wait in `pending` until the turn
/// ends; no row back means no such conversation. `$8`: the messages' times.
pub(super) const APPEND_ROUND: &str =
    concat!(lock_conversation!(add_pending!()), add_messages!("$8"));

/// The end of turn `$3` in its key's row: its claim ended (its running row gone, the
/// key's count of running turns down; ending a claim twice changes nothing, so a
/// coordinator's own release after it is harmless) and its conversation's pending bytes
/// (`prior`, read before the statement cleared them) plus `$also` added to the key's
/// stored bytes. `conv` names the conversation's key.
macro_rules! end_turn {
    ($($also:tt)*) => {
        concat!(
            ", released AS (
    DELETE FROM buddy_running_turns WHERE turn_id = $3 RETURNING owner
), ended AS (
    INSERT INTO buddy_owner_turns (owner, running, bytes)
    SELECT k.owner, 0, COALESCE((SELECT pending FROM prior), 0)
        + CASE WHEN EXISTS (SELECT 1 FROM conv) THEN ",
            $($also)*,
            " ELSE 0 END
    FROM (SELECT owner FROM conv UNION SELECT owner FROM released) AS k
    ON CONFLICT (owner) DO UPDATE SET
        running = buddy_owner_turns.running - (SELECT COUNT(*) FROM released),
        bytes = buddy_owner_turns.bytes + EXCLUDED.bytes
)"
        )
    };
}

/// The conversation's pending bytes as the statement found them (every part of a
/// statement reads from its start, so this sees them before `conv` clears them; only the
/// turn that ends writes them: one turn runs on a conversation at a time).
macro_rules! prior_pending {
    () => {
        ", prior AS (
    SELECT pending FROM buddy_conversations WHERE id = $1
)"
    };
}

/// A turn's last messages, its end and the end of its claim in one statement (`$8`–`$11`:
/// stop reason, stats, error, tape; `$12` the messages' times); the end is recorded only
/// with the messages.
pub(super) const CLOSE_TURN: &str = concat!(
    lock_conversation!(",\n        pending = 0"),
    prior_pending!(),
    ", finish AS (
    UPDATE buddy_turns SET finished_at_ms = $2, stop_reason = $8, stats = $9, error = $10, tape = $11
    WHERE id = $3 AND EXISTS (SELECT 1 FROM conv)
)",
    end_turn!(bytes_of_messages!()),
    add_messages!("$12")
);

/// A turn's end with no last messages, and the end of its claim, in one statement (`$1`
/// the conversation, `$2` the time, `$3` the turn, `$4`–`$7` stop reason, stats, error,
/// tape), as `finish_turn` records it.
pub(super) const FINISH_TURN: &str = concat!(
    "WITH conv AS (
    UPDATE buddy_conversations SET pending = 0 WHERE id = $1 RETURNING owner
)",
    prior_pending!(),
    ", finish AS (
    UPDATE buddy_turns SET finished_at_ms = $2, stop_reason = $4, stats = $5, error = $6, tape = $7
    WHERE id = $3 AND conversation_id = $1
    RETURNING id
)",
    end_turn!("0"),
    "
SELECT id FROM finish"
);

/// A batch of messages as the column arrays the appends `UNNEST`.
pub(super) struct MessageColumns<'m> {
    pub(super) roles: Vec<&'static str>,
    pub(super) bodies: Vec<String>,
    pub(super) tokens: Vec<Option<i64>>,
    pub(super) encodings: Vec<Option<&'m str>>,
    /// When each was made: its time given, else now.
    pub(super) times: Vec<i64>,
}

impl<'m> MessageColumns<'m> {
    /// The columns of `messages`, with their `counts` and the `times` they were made
    /// (either may be shorter: the rest have none, and are made now).
    pub(super) fn of(
        messages: &[Message],
        counts: &'m [Option<TokenCount>],
        times: &[i64],
    ) -> Result<Self, StoreError> {
        let now = now_ms();
        let mut columns = MessageColumns {
            roles: Vec::with_capacity(messages.len()),
            bodies: Vec::with_capacity(messages.len()),
            tokens: Vec::with_capacity(messages.len()),
            encodings: Vec::with_capacity(messages.len()),
            times: (0..messages.len())
                .map(|i| times.get(i).copied().unwrap_or(now))
                .collect(),
        };
        for (i, message) in messages.iter().enumerate() {
            columns.roles.push(role(message));
            columns
                .bodies
                .push(message_json(message).map_err(|e| StoreError::Backend(e.to_string()))?);
            let (count, encoding) = count_columns(counts.get(i));
            columns.tokens.push(count);
            columns.encodings.push(encoding);
        }
        Ok(columns)
    }
}

/// `sql`, one of the statements above, with the parameters they all share bound: the
/// conversation `$1`, the time `$2`, the turn `$3` and the messages' columns `$4`–`$7`
/// (their times are bound last, after each statement's own: `columns.times`).
pub(super) fn with_messages<'q>(
    sql: &'static str,
    conversation: &'q str,
    turn: &'q str,
    columns: &'q MessageColumns<'_>,
) -> Query<'q, Postgres, PgArguments> {
    sqlx::query(sql)
        .bind(conversation)
        .bind(now_ms())
        .bind(turn)
        .bind(&columns.roles)
        .bind(&columns.bodies)
        .bind(&columns.tokens)
        .bind(&columns.encodings)
}

/// Runs one of the statements above; no row back means conversation `id` does not exist.
pub(super) async fn write<'e>(
    query: Query<'_, Postgres, PgArguments>,
    executor: impl sqlx::PgExecutor<'e>,
    id: &str,
) -> Result<(), StoreError> {
    match query.fetch_optional(executor).await.map_err(backend)? {
        Some(_) => Ok(()),
        None => Err(StoreError::NotFound(id.to_owned())),
    }
}

/// A turn's opening on an existing conversation in one statement: the conversation's row
/// (locked, its settings replaced by `$10` when given), the turn's record and its first
/// messages (`$11` their times), numbered as `APPEND_MESSAGES` numbers them.
pub(super) const OPEN_TURN: &str = concat!(
    lock_conversation!(concat!(
        ",\n        settings = COALESCE($10, settings)",
        add_pending!()
    )),
    add_turn!(),
    add_messages!("$11")
);

/// A turn's opening on a new conversation of owner `$11` in one statement: the
/// conversation, the turn's record and its first messages (`$12` their times).
pub(super) const OPEN_CONVERSATION: &str = concat!(
    "WITH conv AS (
    INSERT INTO buddy_conversations (id, owner, created_at_ms, updated_at_ms, settings, last_seq, pending)
    VALUES ($1, $11, $2, $2, $10, cardinality($4::TEXT[]), ",
    bytes_of_messages!(),
    ")
    RETURNING 0::BIGINT AS base, owner
)",
    add_turn!(),
    add_messages!("$12")
);

/// A turn's opening on a new conversation and its claim in one statement: the owner
/// `$11`'s count of running turns goes up while under `$13` and the running turn's row
/// goes in with it (as the coordinator's claim does), and only then the conversation,
/// the turn's record and its first messages (`$12` their times). No row back: the owner
/// is at its cap, and nothing was written.
pub(super) const OPEN_CLAIMED: &str = concat!(
    "WITH slot AS (
    INSERT INTO buddy_owner_turns (owner, running) VALUES ($11, 1)
    ON CONFLICT (owner) DO UPDATE SET running = buddy_owner_turns.running + 1
    WHERE buddy_owner_turns.running < $13
    RETURNING running
), claimed AS (
    INSERT INTO buddy_running_turns (turn_id, conversation_id, owner, instance, started_at_ms)
    SELECT $3, $1, $11, $9, $2 FROM slot
    RETURNING turn_id
), conv AS (
    INSERT INTO buddy_conversations (id, owner, created_at_ms, updated_at_ms, settings, last_seq, pending)
    SELECT $1, $11, $2, $2, $10, cardinality($4::TEXT[]), ",
    bytes_of_messages!(),
    " FROM claimed
    RETURNING 0::BIGINT AS base, owner
)",
    add_turn!(),
    add_messages!("$12")
);
