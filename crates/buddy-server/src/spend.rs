//! Per-key spend ceilings: what a key's turns cost is kept in the store's ledger per UTC
//! day; a key at its daily or monthly ceiling gets 429 for new turns. A turn's model
//! calls reserve their worst case of the key's room as they go ([`crate::key_ledger`]);
//! a one-off call (a compaction) holds its worst case before it starts. Either is
//! settled to what it cost, so calls running at once cannot together pass the ceiling.

use std::time::Duration;

use buddy_core::Usd;
use buddy_store::{SpendHold, Store};

use crate::error::AppError;
use crate::settings::SpendCeiling;

/// How buddy's answer to a key at its spend ceiling begins, where a client is given an
/// ordinary answer that ends the session (Messages, Responses) rather than a 429 it would
/// retry; the refusal's own words follow.
pub(crate) const AT_CEILING_ANSWER: &str =
    "buddy stopped here: this key has reached its spend ceiling. ";

/// buddy's answer when a turn whose budget was its key's room (`room`) ended for its cost.
pub(crate) fn room_spent_words(name: &str, room: Usd) -> String {
    format!(
        "{AT_CEILING_ANSWER}Key `{name}` had {room} left under its ceiling when this turn began, \
         less than its next model call would cost: its turns end this way until the ceiling's \
         day or month is over. The operator sets it (max_daily_cost_usd / max_monthly_cost_usd \
         in [[server.keys]] or [server])."
    )
}

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
            return Err(AppError::AtCeiling(format!(
                "key `{name}` has spent {spent} {when}, its {kind} ceiling is {limit}: new turns are \
                 refused until {until}. The operator sets it ({setting} in [[server.keys]] or [server])"
            )));
        }
        let left = Usd::from_nanos(limit.nanos() - spent.nanos());
        room = Some(room.map_or(left, |r| r.min(left)));
    }
    Ok(room)
}

/// How long a hold lasts past the turn's deadline (or, without one, at all) if its turn
/// never settles it: a backstop, as a dead process's holds go before (SQLite frees them
/// when opened again, PostgreSQL once the instance's heartbeat lapses).
pub(crate) const HOLD_LASTS: Duration = Duration::from_secs(3600);

/// Now, in ms since the epoch.
pub(crate) fn now_ms() -> i64 {
    i64::try_from(time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000)
        .unwrap_or(i64::MAX)
}

/// Why a call of a turn was not made (the guard's detail): its key's room is short.
pub(crate) fn no_room_detail(name: &str, least: Usd) -> String {
    format!(
        "key `{name}`'s room under its spend ceiling (what it spent and what its calls in flight \
         hold) is less than the next model call needs ({least} at least): the call was not made"
    )
}

/// buddy's answer when a turn ended because its key's room could not take its next call.
pub(crate) fn no_room_words(name: &str) -> String {
    format!(
        "{AT_CEILING_ANSWER}Key `{name}`'s room under its ceiling, less what its other calls in \
         flight hold, could not take this turn's next model call. Send it again once they end, or \
         once the ceiling's day or month is over. The operator sets it (max_daily_cost_usd / \
         max_monthly_cost_usd in [[server.keys]] or [server])."
    )
}

/// Each ceiling of `ceiling` at `now` as (the first day it counts from, its limit).
pub(crate) fn ceilings(ceiling: SpendCeiling, now: time::OffsetDateTime) -> Vec<(String, Usd)> {
    [
        (day(now), ceiling.daily),
        (month_start(now), ceiling.monthly),
    ]
    .into_iter()
    .filter_map(|(since, limit)| Some((since, limit?)))
    .collect()
}

/// Admits a turn under its key's ceiling (`None`: no ceiling) without holding anything:
/// its calls reserve their worst cases as they go ([`crate::key_ledger`]). A key at its
/// ceiling gets 429; under a ceiling a model without a price (`unpriced`) is refused.
pub(crate) async fn admit_turn(
    store: &dyn Store,
    holder: &Holder<'_>,
    unpriced: Option<&str>,
    now: time::OffsetDateTime,
) -> Result<(), AppError> {
    if holder.ceiling.is_none() {
        return Ok(());
    }
    room(store, holder.owner, holder.name, holder.ceiling, now).await?;
    match unpriced {
        Some(model) => Err(unpriced_refusal(model, holder.name)),
        None => Ok(()),
    }
}

/// The 400 of a model without a price under a ceiling.
fn unpriced_refusal(model: &str, name: &str) -> AppError {
    AppError::BadRequest(format!(
        "model `{model}` has no price, and key `{name}` has a spend ceiling: what its turns cost could not be counted. The operator must price it in buddy.toml (`prices`, dollars per million tokens)"
    ))
}

/// What a starting turn holds of its key's spend room; settled by [`settle`].
#[derive(Debug)]
pub(crate) struct Held {
    /// The hold's id in the store.
    pub id: String,
    /// What the turn may spend: its money budget.
    pub amount: Usd,
}

/// Who holds and under which ceiling: the key's identity and name, its ceiling, and the
/// turn's own budget (`None`: all the room left) and deadline.
pub(crate) struct Holder<'a> {
    pub owner: &'a str,
    pub name: &'a str,
    pub ceiling: SpendCeiling,
    pub budget: Option<Usd>,
    pub deadline: Option<Duration>,
}

/// Holds the room a turn may spend under its key's ceiling (`None`: no ceiling). Under
/// a ceiling a model without a price (`unpriced` names it) is refused, as its cost could
/// not be counted; a key whose calls in flight hold all its room gets 429.
pub(crate) async fn hold(
    store: &dyn Store,
    holder: &Holder<'_>,
    unpriced: Option<&str>,
    now: time::OffsetDateTime,
) -> Result<Option<Held>, AppError> {
    let name = holder.name;
    if holder.ceiling.is_none() {
        return Ok(None);
    }
    // A key at its ceiling is told what it spent (`room`'s refusal), before anything else;
    // the store's hold reads the spend again only for a priced turn.
    let at_ceiling = || room(store, holder.owner, name, holder.ceiling, now);
    if let Some(model) = unpriced {
        at_ceiling().await?;
        return Err(unpriced_refusal(model, name));
    }
    let ceilings = ceilings(holder.ceiling, now);
    let now_ms = i64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX);
    let lasts = holder.deadline.unwrap_or_default() + HOLD_LASTS;
    let id = buddy_store::new_id("hold");
    let amount = store
        .hold_spend(SpendHold {
            owner: holder.owner,
            id: &id,
            wanted: holder.budget,
            ceilings: &ceilings,
            now_ms,
            expires_at_ms: now_ms
                .saturating_add(i64::try_from(lasts.as_millis()).unwrap_or(i64::MAX)),
        })
        .await?;
    if amount == Usd::ZERO {
        at_ceiling().await?;
        return Err(AppError::TooManyTurns(format!(
            "key `{name}`'s calls in flight hold the rest of what it may spend under its ceiling: wait for one to end"
        )));
    }
    Ok(Some(Held { id, amount }))
}

/// Ends a turn's hold (if it had one) and adds what it cost to `owner`'s spend today; a
/// failed write is logged, never an error: what was spent was spent.
pub(crate) async fn settle(
    store: &dyn Store,
    owner: &str,
    name: &str,
    held: Option<&Held>,
    cost: Option<Usd>,
) {
    let Some(held) = held else {
        return add(store, owner, name, cost.unwrap_or(Usd::ZERO), "turn").await;
    };
    let today = day(time::OffsetDateTime::now_utc());
    let cost = cost.unwrap_or(Usd::ZERO);
    if let Err(e) = store.settle_spend(owner, &held.id, &today, cost).await {
        tracing::error!(key = %name, error = %e, "the turn's cost was not added to the key's spend (its hold lapses by itself)");
    }
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
    use buddy_store::prelude::*;

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
            matches!(&refused, AppError::AtCeiling(m) if m.contains("monthly ceiling is $9.5000") && m.contains("alice")),
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
