//! Per-key spend ceilings: what a key's turns cost is kept in the store's ledger per UTC
//! day; a key at its daily or monthly ceiling gets 429 for new turns, and a turn it
//! starts may spend no more than the room left.

use buddy_core::Usd;
use buddy_store::Store;

use crate::error::AppError;
use crate::settings::SpendCeiling;

/// A UTC date as the ledger keys it, `YYYY-MM-DD`.
pub(crate) fn day(at: time::OffsetDateTime) -> String {
    let date = at.date();
    format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

/// The first day of `at`'s month, `YYYY-MM-01`.
fn month_start(at: time::OffsetDateTime) -> String {
    let date = at.date();
    format!("{:04}-{:02}-01", date.year(), u8::from(date.month()))
}

/// The room `owner` (the key `name`) has left under `ceiling` at `now`; `None` when no
/// ceiling is set. A key at a ceiling is refused with 429 and what to do.
pub(crate) async fn room(
    store: &dyn Store,
    owner: &str,
    name: &str,
    ceiling: SpendCeiling,
    now: time::OffsetDateTime,
) -> Result<Option<Usd>, AppError> {
    let mut room: Option<Usd> = None;
    let periods = [
        (
            ceiling.daily,
            day(now),
            "today",
            "daily",
            "00:00 UTC",
            "max_daily_cost_usd",
        ),
        (
            ceiling.monthly,
            month_start(now),
            "this month",
            "monthly",
            "the first of next month (UTC)",
            "max_monthly_cost_usd",
        ),
    ];
    for (limit, since, when, kind, until, setting) in periods {
        let Some(limit) = limit else { continue };
        let spent = store.spend_since(owner, &since).await?;
        if spent >= limit {
            return Err(AppError::TooManyTurns(format!(
                "key `{name}` has spent {spent} {when}, its {kind} ceiling is {limit}: new turns are \
                 refused until {until}. The operator sets it ({setting} in [[server.keys]] or [server])"
            )));
        }
        let left = Usd::from_nanos(limit.nanos() - spent.nanos());
        room = Some(room.map_or(left, |r| r.min(left)));
    }
    Ok(room)
}

/// Adds `cost` to `owner`'s spend today (the key `name`, for the log); a failed write
/// is logged, never an error: what was spent was spent.
pub(crate) async fn add(store: &dyn Store, owner: &str, name: &str, cost: Usd, what: &str) {
    if cost == Usd::ZERO {
        return;
    }
    let today = day(time::OffsetDateTime::now_utc());
    if let Err(e) = store.add_spend(owner, &today, cost).await {
        tracing::error!(key = %name, error = %e, "the {what}'s cost was not added to the key's spend");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_months_are_utc_dates() {
        let at = time::OffsetDateTime::from_unix_timestamp(1_795_484_102).unwrap();
        assert_eq!(day(at), "2026-11-24");
        assert_eq!(month_start(at), "2026-11-01");
    }

    #[tokio::test]
    async fn the_room_is_the_smaller_of_what_the_day_and_the_month_leave() {
        let store = buddy_store::SqliteStore::in_memory().unwrap();
        let at = time::OffsetDateTime::from_unix_timestamp(1_795_484_102).unwrap();
        let dollars = |d: f64| Usd::from_dollars(d).unwrap();
        store
            .add_spend("o", "2026-11-02", dollars(8.0))
            .await
            .unwrap();
        store
            .add_spend("o", "2026-11-24", dollars(1.5))
            .await
            .unwrap();
        let ceiling = SpendCeiling {
            daily: Some(dollars(2.0)),
            monthly: Some(dollars(10.0)),
        };
        let room = room(&store, "o", "alice", ceiling, at).await.unwrap();
        assert_eq!(room, Some(dollars(0.5)));
        let month = SpendCeiling {
            daily: None,
            monthly: Some(dollars(9.5)),
        };
        let refused = super::room(&store, "o", "alice", month, at)
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, AppError::TooManyTurns(m) if m.contains("monthly ceiling is $9.5000") && m.contains("alice")),
            "{refused:?}"
        );
        assert_eq!(
            super::room(&store, "o", "alice", SpendCeiling::default(), at)
                .await
                .unwrap(),
            None
        );
    }
}
