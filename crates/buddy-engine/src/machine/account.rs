//! A model call's account: the tokens it is booked at (the provider's usage, else
//! buddy's own count) and what it cost at the model's price.

use buddy_core::{InputParts, Price, ToolCall, TurnStats, Usage, Usd};

use crate::context::TokenCounter;

/// What one model call is booked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CallAccount {
    /// The usage the turn's stats add up.
    pub usage: Usage,
    /// What the call cost, when the model's price is known.
    pub cost: Option<Usd>,
    /// The request's size as the iteration event reports it.
    pub context_tokens: u64,
}

/// The provider's count of the request, when it gives one: a request is never empty, so
/// a 0 means a server that fills usage without counting.
pub(super) fn reported_input(usage: Option<Usage>) -> Option<u64> {
    usage.map(|u| u.input_tokens).filter(|&n| n > 0)
}

/// buddy's count of a reply: its text and its calls' names and arguments.
pub(super) fn reply_tokens(counter: &dyn TokenCounter, text: &str, calls: &[ToolCall]) -> usize {
    counter.text(text)
        + calls
            .iter()
            .map(|c| counter.text(&c.name) + counter.text(&c.arguments))
            .sum::<usize>()
}

impl CallAccount {
    /// The account of a call whose provider reported `usage` (if it did), whose request
    /// buddy counted at `counted` tokens and whose reply it counts with `reply_tokens`
    /// (only when the provider gave no usage), at `price`.
    pub(super) fn new(
        usage: Option<Usage>,
        counted: usize,
        reply_tokens: impl FnOnce() -> usize,
        price: Option<Price>,
    ) -> Self {
        let context_tokens = reported_input(usage).unwrap_or(counted as u64);
        let usage = usage.unwrap_or_else(|| Usage {
            input_tokens: counted as u64,
            output_tokens: reply_tokens() as u64,
            ..Usage::default()
        });
        CallAccount {
            usage,
            cost: price.map(|price| price.cost(&usage)),
            context_tokens,
        }
    }

    /// Adds the call to the turn's stats: its tokens, and its cost to what was spent.
    pub(super) fn charge(&self, stats: &mut TurnStats) {
        stats.input_tokens += self.usage.input_tokens;
        stats.output_tokens += self.usage.output_tokens;
        let parts = InputParts::of(&self.usage);
        stats.cache_read_tokens += parts.read;
        stats.cache_write_tokens += parts.write_5m + parts.write_1h;
        if let Some(cost) = self.cost {
            let spent = stats.cost_usd.unwrap_or_default();
            stats.cost_usd = Some(spent.saturating_add(cost));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::EstimateCounter;

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        }
    }

    const PRICE: Price = Price::new(1.0, 2.0);

    #[test]
    fn the_providers_usage_is_booked_as_reported() {
        let account = CallAccount::new(Some(usage(1_000, 50)), 900, || unreachable!(), None);
        assert_eq!(account.usage, usage(1_000, 50));
        assert_eq!(account.context_tokens, 1_000);
        assert_eq!(account.cost, None);
    }

    #[test]
    fn without_usage_buddys_counts_are_booked() {
        let account = CallAccount::new(None, 900, || 42, None);
        assert_eq!(account.usage, usage(900, 42));
        assert_eq!(account.context_tokens, 900);
    }

    #[test]
    fn a_usage_of_zero_input_is_booked_but_the_request_size_is_buddys() {
        assert_eq!(reported_input(Some(usage(0, 7))), None);
        let account = CallAccount::new(Some(usage(0, 7)), 900, || unreachable!(), None);
        assert_eq!(account.usage, usage(0, 7));
        assert_eq!(account.context_tokens, 900);
    }

    #[test]
    fn cost_adds_up_in_the_stats() {
        let account = CallAccount::new(Some(usage(1_000_000, 500_000)), 0, || 0, Some(PRICE));
        assert_eq!(account.cost, Usd::from_dollars(2.0));
        let mut stats = TurnStats::default();
        account.charge(&mut stats);
        account.charge(&mut stats);
        assert_eq!(
            (stats.input_tokens, stats.output_tokens),
            (2_000_000, 1_000_000)
        );
        assert_eq!(stats.cost_usd, Usd::from_dollars(4.0));
        let unpriced = CallAccount::new(Some(usage(10, 10)), 0, || 0, None);
        let mut stats = TurnStats::default();
        unpriced.charge(&mut stats);
        assert_eq!(stats.cost_usd, None);
        assert_eq!(stats.input_tokens, 10);
    }

    #[test]
    fn cache_reads_and_writes_add_up_in_the_stats_and_are_priced_as_billed() {
        let anthropic = Usage {
            input_tokens: 10_000,
            output_tokens: 100,
            cached_input_tokens: 8_000,
            cache_write_tokens: 1_500,
            cache_write_1h_tokens: 0,
        };
        let price = Price {
            cached_input: Some(0.3),
            cache_write: Some(3.75),
            cache_write_1h: Some(6.0),
            ..Price::new(3.0, 15.0)
        };
        let account = CallAccount::new(Some(anthropic), 0, || 0, Some(price));
        // 500 × 3 + 8,000 × 0.3 + 1,500 × 3.75 + 100 × 15, per million.
        assert_eq!(
            account.cost,
            Usd::from_dollars((1_500.0 + 2_400.0 + 5_625.0 + 1_500.0) / 1e6)
        );
        let mut stats = TurnStats::default();
        account.charge(&mut stats);
        account.charge(&mut stats);
        assert_eq!(
            (stats.cache_read_tokens, stats.cache_write_tokens),
            (16_000, 3_000)
        );
        let json = serde_json::to_value(stats).unwrap();
        assert_eq!(json["cache_read_tokens"], 16_000);
        // A turn without cache use writes neither field.
        let plain = serde_json::to_value(TurnStats::default()).unwrap();
        assert!(plain.get("cache_read_tokens").is_none(), "{plain}");
    }

    #[test]
    fn a_reply_counts_its_text_and_its_calls() {
        let calls = [ToolCall::new("1", "read", r#"{"path":"a.txt"}"#)];
        let counter = EstimateCounter;
        assert_eq!(
            reply_tokens(&counter, "done", &calls),
            counter.text("done") + counter.text("read") + counter.text(r#"{"path":"a.txt"}"#)
        );
        assert_eq!(reply_tokens(&counter, "", &[]), 0);
    }
}
