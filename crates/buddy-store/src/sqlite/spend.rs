//! The spend ledger on SQLite: a hold checks the room and takes it in one transaction
//! on the store's thread (which runs one job at a time, so no other hold comes between).

use buddy_core::{BoxFuture, Usd};
use rusqlite::{Connection, params};

use super::{SqliteStore, backend};
use crate::columns::{nanos, room_to_hold, stored_nanos};
use crate::error::StoreError;
use crate::records::SpendHold;
use crate::store::Spend;

/// A [`SpendHold`] owned, to send to the store's thread.
struct Hold {
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

/// Checks the room and holds it in one transaction (the store's one thread runs one
/// job at a time, so no other hold comes between).
/// Adds to hold `hold.id` (made if new) when the room is at least `least` nanodollars.
fn hold_room(conn: &mut Connection, hold: &Hold, least: u64) -> Result<Usd, StoreError> {
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
    let mut amount = room_to_hold(hold.wanted, &ceilings, nanos(held)).min(i64::MAX as u64);
    if amount < least.max(1) {
        amount = 0;
    }
    if amount > 0 {
        tx.execute(
            "INSERT INTO spend_holds (id, owner, nanos, expires_at_ms) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (id) DO UPDATE SET nanos = nanos + excluded.nanos",
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
fn settle(
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
        add_to_day(&tx, owner, day, stored_nanos(cost))?;
    }
    tx.commit().map_err(backend)
}

/// Adds `nanos` to `owner`'s spend on `day`: the one statement every booking makes.
fn add_to_day(conn: &Connection, owner: &str, day: &str, nanos: i64) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO spend (owner, day, nanos) VALUES (?1, ?2, ?3)
         ON CONFLICT (owner, day) DO UPDATE SET nanos = nanos + excluded.nanos",
        params![owner, day, nanos],
    )
    .map_err(backend)?;
    Ok(())
}

/// Takes a call's reservation off its hold and adds what the call cost, in one transaction.
fn settle_call(
    conn: &mut Connection,
    owner: &str,
    id: &str,
    reserved: Usd,
    day: &str,
    cost: Usd,
) -> Result<(), StoreError> {
    let tx = conn.transaction().map_err(backend)?;
    tx.execute(
        "UPDATE spend_holds SET nanos = MAX(nanos - ?3, 0) WHERE id = ?1 AND owner = ?2",
        params![id, owner, stored_nanos(reserved)],
    )
    .map_err(backend)?;
    if cost != Usd::ZERO {
        add_to_day(&tx, owner, day, stored_nanos(cost))?;
    }
    tx.commit().map_err(backend)
}

impl Spend for SqliteStore {
    fn add_spend<'a>(
        &'a self,
        owner: &'a str,
        day: &'a str,
        amount: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (owner, day) = (owner.to_owned(), day.to_owned());
        let nanos = stored_nanos(amount);
        self.run(move |conn| add_to_day(conn, &owner, &day, nanos))
    }

    fn spend_since<'a>(
        &'a self,
        owner: &'a str,
        first_day: &'a str,
    ) -> BoxFuture<'a, Result<Usd, StoreError>> {
        let (owner, first_day) = (owner.to_owned(), first_day.to_owned());
        self.run(move |conn| {
            let nanos: i64 = conn
                .query_row(
                    "SELECT COALESCE(SUM(nanos), 0) FROM spend WHERE owner = ?1 AND day >= ?2",
                    params![owner, first_day],
                    |r| r.get(0),
                )
                .map_err(backend)?;
            Ok(Usd::from_nanos(self::nanos(nanos)))
        })
    }

    fn hold_spend<'a>(&'a self, hold: SpendHold<'a>) -> BoxFuture<'a, Result<Usd, StoreError>> {
        let hold = Hold::from(hold);
        self.run(move |conn| hold_room(conn, &hold, 1))
    }

    fn reserve_spend<'a>(
        &'a self,
        hold: SpendHold<'a>,
        least: Usd,
    ) -> BoxFuture<'a, Result<Usd, StoreError>> {
        let hold = Hold::from(hold);
        self.run(move |conn| hold_room(conn, &hold, least.nanos()))
    }

    fn settle_reserved<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        reserved: Usd,
        day: &'a str,
        cost: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (owner, id, day) = (owner.to_owned(), id.to_owned(), day.to_owned());
        self.run(move |conn| settle_call(conn, &owner, &id, reserved, &day, cost))
    }

    fn settle_spend<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        day: &'a str,
        cost: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (owner, id, day) = (owner.to_owned(), id.to_owned(), day.to_owned());
        self.run(move |conn| settle(conn, &owner, &id, &day, cost))
    }
}
