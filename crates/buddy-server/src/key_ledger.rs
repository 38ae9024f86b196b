//! A turn's part of its key's spend ledger, under a spend ceiling: every model call of
//! the turn (and of its sub-agents) reserves its worst case of the key's room before it
//! starts and settles to what it cost after ([`buddy_engine::CallLedger`]), in the store
//! every instance shares. So a key's turns run side by side, none holds the key's whole
//! room, and the ceiling is passed by no more than the calls in flight (a call's real
//! cost above its reservation: one without `max_output_tokens` is reserved at
//! [`DEFAULT_OUTPUT_TOKENS`]). A call that finds no room is not made: the turn ends
//! `cost_budget` with an answer saying why.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use buddy_core::{BoxFuture, Price, Usage, Usd};
use buddy_engine::{CallLedger, CallWorst, Reserved};
use buddy_store::{SpendHold, Store};

use crate::spend;

/// The output a call that sets no `max_output_tokens` is reserved for.
pub(crate) const DEFAULT_OUTPUT_TOKENS: u64 = 8_192;

/// Fewest output tokens a call is worth making with: a room that leaves less after the
/// call's input refuses the call rather than cut it to nothing.
const MIN_OUTPUT_TOKENS: u64 = 256;

/// A turn's reservations in its key's ledger: one hold in the store (its id), grown by
/// each call's worst case and shrunk as calls settle; ended with the turn.
pub(crate) struct KeyLedger {
    store: Arc<dyn Store>,
    owner: String,
    name: String,
    /// Each ceiling as (the first day it counts from, its limit).
    ceilings: Vec<(String, Usd)>,
    /// The turn's model's price (a call that brings none is priced so).
    price: Option<Price>,
    hold_id: String,
    /// When the hold lapses if its turn never ends it (its process died).
    expires_at_ms: i64,
    /// Nanodollars the settled calls booked: the turn's end books only the rest.
    booked: AtomicU64,
    /// Whether a call found no room.
    refused: AtomicBool,
}

impl std::fmt::Debug for KeyLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyLedger")
            .field("key", &self.name)
            .field("hold", &self.hold_id)
            .finish_non_exhaustive()
    }
}

/// Who a ledger books for and under which ceilings.
pub(crate) struct LedgerOf<'a> {
    pub store: Arc<dyn Store>,
    pub owner: &'a str,
    pub name: &'a str,
    pub ceilings: Vec<(String, Usd)>,
    pub price: Option<Price>,
    /// The turn's deadline: its hold lasts that long past [`spend::HOLD_LASTS`].
    pub deadline: Option<Duration>,
}

impl KeyLedger {
    /// A ledger for one turn; it holds nothing until its first call.
    pub(crate) fn new(of: LedgerOf<'_>) -> Self {
        let now = spend::now_ms();
        let lasts = of.deadline.unwrap_or_default() + spend::HOLD_LASTS;
        KeyLedger {
            store: of.store,
            owner: of.owner.to_owned(),
            name: of.name.to_owned(),
            ceilings: of.ceilings,
            price: of.price,
            hold_id: buddy_store::new_id("hold"),
            expires_at_ms: now.saturating_add(i64::try_from(lasts.as_millis()).unwrap_or(i64::MAX)),
            booked: AtomicU64::new(0),
            refused: AtomicBool::new(false),
        }
    }

    /// Whether a call of the turn was refused for want of room.
    pub(crate) fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// Ends the turn's hold (what its calls still reserve) and books what it cost beyond
    /// what its calls booked as they settled (its tools' sampling calls); a failed write
    /// is logged: what was spent was spent.
    pub(crate) async fn close(&self, cost: Option<Usd>) {
        let booked = self.booked.load(Ordering::Relaxed);
        let rest = Usd::from_nanos(cost.map_or(0, |c| c.nanos().saturating_sub(booked)));
        let today = spend::day(time::OffsetDateTime::now_utc());
        if let Err(e) = self
            .store
            .settle_spend(&self.owner, &self.hold_id, &today, rest)
            .await
        {
            tracing::error!(key = %self.name, error = %e, "the turn's hold was not ended (it lapses by itself)");
        }
    }

    fn refuse(&self, why: String) -> Result<Reserved, String> {
        self.refused.store(true, Ordering::Relaxed);
        Err(why)
    }
}

impl CallLedger for KeyLedger {
    fn reserve(&self, worst: CallWorst) -> BoxFuture<'_, Result<Reserved, String>> {
        Box::pin(async move {
            let Some(price) = worst.price.or(self.price) else {
                return Ok(Reserved {
                    amount: Usd::ZERO,
                    price: None,
                    max_output_tokens: None,
                });
            };
            let input = worst.input_tokens;
            let output = worst
                .max_output_tokens
                .map_or(DEFAULT_OUTPUT_TOKENS, u64::from);
            let wanted = price.estimate(input, output);
            let least = price.estimate(input, output.min(MIN_OUTPUT_TOKENS));
            let hold = SpendHold {
                owner: &self.owner,
                id: &self.hold_id,
                wanted: Some(wanted),
                ceilings: &self.ceilings,
                now_ms: spend::now_ms(),
                expires_at_ms: self.expires_at_ms,
            };
            let amount = match self.store.reserve_spend(hold, least).await {
                Ok(amount) => amount,
                Err(e) => {
                    tracing::error!(key = %self.name, error = %e, "the key's ledger could not be read");
                    return self.refuse(format!(
                        "key `{}`'s spend ledger could not be read ({e}): no model call is made uncounted",
                        self.name
                    ));
                }
            };
            if amount == Usd::ZERO {
                return self.refuse(spend::no_room_detail(&self.name, least));
            }
            // Less room than the worst case: the call may write only what it covers.
            let max_output_tokens = (amount < wanted).then(|| {
                let left = amount
                    .nanos()
                    .saturating_sub(price.estimate(input, 0).nanos());
                let per_million = price.estimate(0, 1_000_000).nanos().max(1);
                let fits = u128::from(left) * 1_000_000 / u128::from(per_million);
                u32::try_from(fits.min(u128::from(output))).unwrap_or(u32::MAX)
            });
            Ok(Reserved {
                amount,
                price: Some(price),
                max_output_tokens,
            })
        })
    }

    fn settle(&self, reserved: Reserved, usage: Option<Usage>) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let cost = match (usage, reserved.price) {
                (Some(usage), Some(price)) => price.cost(&usage),
                _ => Usd::ZERO,
            };
            let today = spend::day(time::OffsetDateTime::now_utc());
            match self
                .store
                .settle_reserved(&self.owner, &self.hold_id, reserved.amount, &today, cost)
                .await
            {
                Ok(()) => {
                    self.booked.fetch_add(cost.nanos(), Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::error!(key = %self.name, error = %e, "a call's cost was not booked (the turn's end books it)");
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dollars(d: f64) -> Usd {
        Usd::from_dollars(d).unwrap()
    }

    fn ledger(store: &Arc<dyn Store>, ceiling: f64) -> KeyLedger {
        let today = spend::day(time::OffsetDateTime::now_utc());
        KeyLedger::new(LedgerOf {
            store: Arc::clone(store),
            owner: "o",
            name: "alice",
            ceilings: vec![(today, dollars(ceiling))],
            // $1 per million tokens in, $10 out.
            price: Some(Price::new(1.0, 10.0)),
            deadline: None,
        })
    }

    fn worst(input_tokens: u64, max_output_tokens: Option<u32>) -> CallWorst {
        CallWorst {
            input_tokens,
            max_output_tokens,
            price: None,
        }
    }

    #[tokio::test]
    async fn calls_reserve_their_worst_case_are_cut_to_the_room_and_book_their_cost() {
        let store: Arc<dyn Store> = Arc::new(buddy_store::SqliteStore::in_memory().unwrap());
        let (a, b) = (ledger(&store, 0.10), ledger(&store, 0.10));
        // 10k in ($0.01) and the default 8,192 out ($0.08192): within $0.10, uncut.
        let first = a.reserve(worst(10_000, None)).await.unwrap();
        assert_eq!(first.amount, dollars(0.09192));
        assert_eq!(first.max_output_tokens, None);
        // Another turn of the key: $0.00808 left, $0.001 of it input: cut to 708 tokens.
        let second = b.reserve(worst(1_000, Some(4_000))).await.unwrap();
        assert_eq!(second.max_output_tokens, Some(708));
        // Nothing left: refused, and the turn says so at its end.
        let refused = b.reserve(worst(1_000, Some(300))).await.unwrap_err();
        assert!(
            refused.contains("alice") && refused.contains("calls in flight"),
            "{refused}"
        );
        assert!(b.refused() && !a.refused());
        // The first settles at its cost: $0.02 is booked, the rest of its room freed.
        let usage = Usage {
            input_tokens: 10_000,
            output_tokens: 1_000,
            ..Usage::default()
        };
        a.settle(first, Some(usage)).await;
        let today = spend::day(time::OffsetDateTime::now_utc());
        assert_eq!(store.spend_since("o", &today).await.unwrap(), dollars(0.02));
        let third = b.reserve(worst(1_000, Some(300))).await.unwrap();
        assert_eq!(third.amount, dollars(0.004));
        // A turn's end books only what its calls did not (a sampling call's $0.005), and
        // ends its hold: what its open reservations held is free again.
        a.close(Some(dollars(0.025))).await;
        b.close(None).await;
        assert_eq!(
            store.spend_since("o", &today).await.unwrap(),
            dollars(0.025)
        );
        let again = ledger(&store, 0.10)
            .reserve(worst(0, Some(7_500)))
            .await
            .unwrap();
        assert_eq!(again.amount, dollars(0.075), "all the room not spent");
    }

    #[tokio::test]
    async fn a_room_that_leaves_too_little_to_write_refuses_the_call() {
        let store: Arc<dyn Store> = Arc::new(buddy_store::SqliteStore::in_memory().unwrap());
        // $0.003: 1k tokens in ($0.001) leaves 200 tokens out, under 256.
        let refused = ledger(&store, 0.003)
            .reserve(worst(1_000, None))
            .await
            .unwrap_err();
        assert!(refused.contains("$0.0036"), "{refused}");
        // A call that asks for less than 256 needs only what it asks.
        let small = ledger(&store, 0.003)
            .reserve(worst(1_000, Some(100)))
            .await
            .unwrap();
        assert_eq!(small.max_output_tokens, None);
    }
}
