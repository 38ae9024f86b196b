//! The spend ledger the server's per-key ceilings read: what each key spent per day,
//! and what running turns hold of the room left.

use buddy_core::{BoxFuture, Usd};

use crate::error::StoreError;
use crate::records::SpendHold;

/// The spend ledger: per key and day, with holds for turns under way. It outlives
/// conversations.
pub trait Spend: Send + Sync {
    /// Adds `amount` to what `owner` spent on `day` (a UTC date, `YYYY-MM-DD`): the
    /// ledger the server's per-key spend ceilings read. It outlives conversations.
    fn add_spend<'a>(
        &'a self,
        owner: &'a str,
        day: &'a str,
        amount: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// What `owner` spent from `first_day` (inclusive, `YYYY-MM-DD`) on.
    fn spend_since<'a>(
        &'a self,
        owner: &'a str,
        first_day: &'a str,
    ) -> BoxFuture<'a, Result<Usd, StoreError>>;
    /// Holds part of `hold.owner`'s room under its ceilings for a call about to start, so
    /// that calls running at once cannot together pass a ceiling: what is held counts as
    /// spent until [`Spend::settle_spend`] (or `expires_at_ms`, if its process died).
    /// Returns what it holds: `wanted` or the room left, the smaller; zero holds nothing.
    /// A store that can checks and holds atomically; this default only reads the room.
    fn hold_spend<'a>(&'a self, hold: SpendHold<'a>) -> BoxFuture<'a, Result<Usd, StoreError>> {
        Box::pin(async move {
            let mut room = hold.wanted;
            for (first_day, limit) in hold.ceilings {
                let spent = self.spend_since(hold.owner, first_day).await?;
                let left = Usd::from_nanos(limit.nanos().saturating_sub(spent.nanos()));
                room = Some(room.map_or(left, |r| r.min(left)));
            }
            Ok(room.unwrap_or(Usd::ZERO))
        })
    }
    /// Adds to hold `hold.id` of `hold.owner` (made if new) for one model call about to
    /// start: `hold.wanted`, or the room left under the ceilings if that is smaller but
    /// still at least `least`. Returns what it added; zero adds nothing (the room is
    /// short of `least`). Checked and added atomically where the store can; this default
    /// only reads the room.
    fn reserve_spend<'a>(
        &'a self,
        hold: SpendHold<'a>,
        least: Usd,
    ) -> BoxFuture<'a, Result<Usd, StoreError>> {
        Box::pin(async move {
            let room = self.hold_spend(hold).await?;
            Ok(if room >= least { room } else { Usd::ZERO })
        })
    }
    /// Settles one call's reservation: `reserved` comes off hold `id` of `owner` and what
    /// the call cost is added to `day`'s spend, at once.
    fn settle_reserved<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        reserved: Usd,
        day: &'a str,
        cost: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = (id, reserved);
        Box::pin(async move {
            match cost == Usd::ZERO {
                true => Ok(()),
                false => self.add_spend(owner, day, cost).await,
            }
        })
    }
    /// Ends hold `id` of `owner` and adds what its turn cost to `day`'s spend.
    fn settle_spend<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        day: &'a str,
        cost: Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = id;
        Box::pin(async move {
            match cost == Usd::ZERO {
                true => Ok(()),
                false => self.add_spend(owner, day, cost).await,
            }
        })
    }
}
