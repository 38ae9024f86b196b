//! PostgreSQL's spend holds and storage count. A hold takes a transaction-scoped
//! advisory lock on its owner, so two instances holding for one key at once take turns.

use buddy_core::Usd;
use sqlx::{PgPool, Row};

use super::backend;
use crate::store::{SpendHold, StoreError, room_to_hold};

fn nanos(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Checks the room and holds it in one transaction, under the owner's lock.
pub(super) async fn hold(pool: &PgPool, hold: SpendHold<'_>) -> Result<Usd, StoreError> {
    let mut tx = pool.begin().await.map_err(backend)?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 46))")
        .bind(hold.owner)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
    sqlx::query("DELETE FROM buddy_spend_holds WHERE owner = $1 AND expires_at_ms <= $2")
        .bind(hold.owner)
        .bind(hold.now_ms)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
    let held: i64 = sqlx::query(
        "SELECT COALESCE(SUM(nanos), 0)::BIGINT FROM buddy_spend_holds WHERE owner = $1",
    )
    .bind(hold.owner)
    .fetch_one(&mut *tx)
    .await
    .and_then(|row| row.try_get(0))
    .map_err(backend)?;
    let mut ceilings = Vec::with_capacity(hold.ceilings.len());
    for (first_day, limit) in hold.ceilings {
        let spent: i64 = sqlx::query(
            "SELECT COALESCE(SUM(nanos), 0)::BIGINT FROM buddy_spend WHERE owner = $1 AND day >= $2",
        )
        .bind(hold.owner)
        .bind(first_day)
        .fetch_one(&mut *tx)
        .await
        .and_then(|row| row.try_get(0))
        .map_err(backend)?;
        ceilings.push((*limit, nanos(spent)));
    }
    let amount = room_to_hold(hold.wanted, &ceilings, nanos(held)).min(i64::MAX as u64);
    if amount > 0 {
        sqlx::query(
            "INSERT INTO buddy_spend_holds (id, owner, nanos, expires_at_ms) VALUES ($1, $2, $3, $4)",
        )
        .bind(hold.id)
        .bind(hold.owner)
        .bind(i64::try_from(amount).unwrap_or(i64::MAX))
        .bind(hold.expires_at_ms)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
    }
    tx.commit().await.map_err(backend)?;
    Ok(Usd::from_nanos(amount))
}

/// Ends a hold and adds what its turn cost, in one transaction.
pub(super) async fn settle(
    pool: &PgPool,
    owner: &str,
    id: &str,
    day: &str,
    cost: Usd,
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await.map_err(backend)?;
    sqlx::query("DELETE FROM buddy_spend_holds WHERE id = $1 AND owner = $2")
        .bind(id)
        .bind(owner)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
    if cost != Usd::ZERO {
        sqlx::query(
            "INSERT INTO buddy_spend (owner, day, nanos) VALUES ($1, $2, $3)
             ON CONFLICT (owner, day) DO UPDATE SET nanos = buddy_spend.nanos + excluded.nanos",
        )
        .bind(owner)
        .bind(day)
        .bind(i64::try_from(cost.nanos()).unwrap_or(i64::MAX))
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
    }
    tx.commit().await.map_err(backend)
}

/// Bytes of message JSON in `owner`'s conversations.
pub(super) async fn stored_bytes(pool: &PgPool, owner: &str) -> Result<u64, StoreError> {
    let bytes: i64 = sqlx::query(
        "SELECT COALESCE(SUM(octet_length(m.body)), 0)::BIGINT FROM buddy_messages m
         JOIN buddy_conversations c ON c.id = m.conversation_id WHERE c.owner = $1",
    )
    .bind(owner)
    .fetch_one(pool)
    .await
    .and_then(|row| row.try_get(0))
    .map_err(backend)?;
    Ok(nanos(bytes))
}
