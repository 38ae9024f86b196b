//! SQLite's spend holds and storage count: what [`crate::Store::hold_spend`],
//! [`crate::Store::settle_spend`] and [`crate::Store::stored_bytes`] do on the store's
//! thread, each in one transaction.

use buddy_core::Usd;
use rusqlite::{Connection, params};

use crate::store::{SpendHold, StoreError, room_to_hold};

/// A [`SpendHold`] owned, to send to the store's thread.
pub(crate) struct Hold {
    owner: String,
    id: String,
    wanted: Option<Usd>,
    ceilings: Vec<(String, Usd)>,
    now_ms: i64,
    expires_at_ms: i64,
}

impl From<SpendHold<'_>> for Hold {
    fn from(hold: SpendHold<'_>) -> Self {
        Hold {
            owner: hold.owner.to_owned(),
            id: hold.id.to_owned(),
            wanted: hold.wanted,
            ceilings: hold.ceilings.to_vec(),
            now_ms: hold.now_ms,
            expires_at_ms: hold.expires_at_ms,
        }
    }
}

fn backend(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn nanos(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Checks the room and holds it in one transaction (the store's one thread runs one
/// job at a time, so no other hold comes between).
pub(crate) fn hold(conn: &mut Connection, hold: &Hold) -> Result<Usd, StoreError> {
    let tx = conn.transaction().map_err(backend)?;
    tx.execute(
        "DELETE FROM spend_holds WHERE owner = ?1 AND expires_at_ms <= ?2",
        params![hold.owner, hold.now_ms],
    )
    .map_err(backend)?;
    let held: i64 = tx
        .query_row(
            "SELECT COALESCE(SUM(nanos), 0) FROM spend_holds WHERE owner = ?1",
            params![hold.owner],
            |r| r.get(0),
        )
        .map_err(backend)?;
    let mut ceilings = Vec::with_capacity(hold.ceilings.len());
    for (first_day, limit) in &hold.ceilings {
        let spent: i64 = tx
            .query_row(
                "SELECT COALESCE(SUM(nanos), 0) FROM spend WHERE owner = ?1 AND day >= ?2",
                params![hold.owner, first_day],
                |r| r.get(0),
            )
            .map_err(backend)?;
        ceilings.push((*limit, nanos(spent)));
    }
    let amount = room_to_hold(hold.wanted, &ceilings, nanos(held)).min(i64::MAX as u64);
    if amount > 0 {
        tx.execute(
            "INSERT INTO spend_holds (id, owner, nanos, expires_at_ms) VALUES (?1, ?2, ?3, ?4)",
            params![
                hold.id,
                hold.owner,
                i64::try_from(amount).unwrap_or(i64::MAX),
                hold.expires_at_ms
            ],
        )
        .map_err(backend)?;
    }
    tx.commit().map_err(backend)?;
    Ok(Usd::from_nanos(amount))
}

/// Ends a hold and adds what its turn cost, in one transaction.
pub(crate) fn settle(
    conn: &mut Connection,
    owner: &str,
    id: &str,
    day: &str,
    cost: Usd,
) -> Result<(), StoreError> {
    let tx = conn.transaction().map_err(backend)?;
    tx.execute(
        "DELETE FROM spend_holds WHERE id = ?1 AND owner = ?2",
        params![id, owner],
    )
    .map_err(backend)?;
    if cost != Usd::ZERO {
        tx.execute(
            "INSERT INTO spend (owner, day, nanos) VALUES (?1, ?2, ?3)
             ON CONFLICT (owner, day) DO UPDATE SET nanos = nanos + excluded.nanos",
            params![owner, day, i64::try_from(cost.nanos()).unwrap_or(i64::MAX)],
        )
        .map_err(backend)?;
    }
    tx.commit().map_err(backend)
}

/// Bytes of message JSON in `owner`'s conversations.
pub(crate) fn stored_bytes(conn: &Connection, owner: &str) -> Result<u64, StoreError> {
    let bytes: i64 = conn
        .query_row(
            "SELECT COALESCE(SUM(LENGTH(CAST(m.body AS BLOB))), 0) FROM messages m
             JOIN conversations c ON c.id = m.conversation_id WHERE c.owner = ?1",
            params![owner],
            |r| r.get(0),
        )
        .map_err(backend)?;
    Ok(nanos(bytes))
}
