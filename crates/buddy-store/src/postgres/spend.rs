//! The spend ledger on PostgreSQL. A hold takes a transaction-scoped advisory lock on
//! its owner, so two instances holding for one key at once take turns.

use super::PgPool;
use buddy_core::{BoxFuture, Usd};
use sqlx::Row;

use super::PgStore;
use super::rows::backend;
use crate::columns::{nanos, now_ms, stored_nanos};
use crate::error::StoreError;
use crate::records::SpendHold;
use crate::store::Spend;

impl Spend for PgStore {
    fn add_spend<'a>(
        &'a self,
        owner: &'a str,
        day: &'a str,
        amount: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO buddy_spend (owner, day, nanos) VALUES ($1, $2, $3)
                 ON CONFLICT (owner, day) DO UPDATE SET nanos = buddy_spend.nanos + excluded.nanos",
            )
            .bind(owner)
            .bind(day)
            .bind(stored_nanos(amount))
            .execute(&self.inner.pool)
            .await
            .map_err(backend)?;
            Ok(())
        })
    }

    fn spend_since<'a>(
        &'a self,
        owner: &'a str,
        first_day: &'a str,
    ) -> BoxFuture<'a, Result<Usd, StoreError>> {
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT COALESCE(SUM(nanos), 0)::BIGINT FROM buddy_spend WHERE owner = $1 AND day >= $2",
            )
            .bind(owner)
            .bind(first_day)
            .fetch_one(&self.inner.pool)
            .await
            .map_err(backend)?;
            let nanos: i64 = row.try_get(0).map_err(backend)?;
            Ok(Usd::from_nanos(self::nanos(nanos)))
        })
    }

    fn hold_spend<'a>(&'a self, hold: SpendHold<'a>) -> BoxFuture<'a, Result<Usd, StoreError>> {
        Box::pin(hold_room(&self.inner.pool, &self.inner.instance, hold, 1))
    }

    fn reserve_spend<'a>(
        &'a self,
        hold: SpendHold<'a>,
        least: Usd,
    ) -> BoxFuture<'a, Result<Usd, StoreError>> {
        Box::pin(hold_room(
            &self.inner.pool,
            &self.inner.instance,
            hold,
            least.nanos(),
        ))
    }

    fn settle_reserved<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        reserved: Usd,
        day: &'a str,
        cost: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            // One statement: the reservation off its hold and the cost in the ledger.
            sqlx::query(SETTLE_CALL)
                .bind(id)
                .bind(owner)
                .bind(stored_nanos(reserved))
                .bind(day)
                .bind(stored_nanos(cost))
                .execute(&self.inner.pool)
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn settle_spend<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        day: &'a str,
        cost: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(settle(&self.inner.pool, owner, id, day, cost))
    }
}

/// A call settled: its reservation (`$3`) off hold `$1` of `$2`, its cost (`$5`) added
/// to day `$4`'s spend.
const SETTLE_CALL: &str = "
WITH released AS (
    UPDATE buddy_spend_holds SET nanos = GREATEST(nanos - $3, 0) WHERE id = $1 AND owner = $2
)
INSERT INTO buddy_spend (owner, day, nanos) SELECT $2, $4, $5 WHERE $5 > 0
ON CONFLICT (owner, day) DO UPDATE SET nanos = buddy_spend.nanos + excluded.nanos";

/// Checks the room and adds to hold `hold.id` (made if new) when it is at least `least`
/// nanodollars, under the owner's lock, for a turn of `instance`: one round trip, the
/// schema's `buddy_hold_room`. Holds that lapsed, and those of instances whose heartbeat
/// stopped (a crash: their turns are `interrupted`), hold nothing and go first.
async fn hold_room(
    pool: &PgPool,
    instance: &str,
    hold: SpendHold<'_>,
    least: u64,
) -> Result<Usd, StoreError> {
    let (days, limits): (Vec<&str>, Vec<i64>) = hold
        .ceilings
        .iter()
        .map(|(first_day, limit)| (first_day.as_str(), stored_nanos(*limit)))
        .unzip();
    let amount: i64 =
        sqlx::query("SELECT buddy_hold_room($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)")
            .bind(hold.owner)
            .bind(hold.id)
            .bind(hold.wanted.map(stored_nanos))
            .bind(&days)
            .bind(&limits)
            .bind(hold.now_ms)
            .bind(now_ms() - super::STALE_MS)
            .bind(hold.expires_at_ms)
            .bind(instance)
            .bind(i64::try_from(least).unwrap_or(i64::MAX))
            .fetch_one(pool)
            .await
            .and_then(|row| row.try_get(0))
            .map_err(backend)?;
    Ok(Usd::from_nanos(nanos(amount)))
}

/// Ends a hold and adds what its turn cost, in one transaction.
async fn settle(
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
        .bind(stored_nanos(cost))
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
    }
    tx.commit().await.map_err(backend)
}
