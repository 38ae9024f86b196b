//! What model calls cost in money: an exact amount type and per-model prices.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Usage;

/// An amount of US dollars, held exactly in nano-dollars so sums never drift; written
/// and read as a plain number of dollars (`0.0123`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usd(u64);

impl Usd {
    /// Nothing.
    pub const ZERO: Usd = Usd(0);

    /// An amount of `nanos` billionths of a dollar.
    pub const fn from_nanos(nanos: u64) -> Self {
        Usd(nanos)
    }

    /// `dollars` as an exact amount; `None` for a negative or non-finite number.
    pub fn from_dollars(dollars: f64) -> Option<Self> {
        let nanos = (dollars * 1e9).round();
        (nanos.is_finite() && nanos >= 0.0 && nanos < u64::MAX as f64).then_some(Usd(nanos as u64))
    }

    /// Billionths of a dollar.
    pub const fn nanos(self) -> u64 {
        self.0
    }

    /// The amount in dollars.
    pub fn dollars(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// The sum, capped at the largest amount.
    pub const fn saturating_add(self, other: Usd) -> Usd {
        Usd(self.0.saturating_add(other.0))
    }
}

impl std::fmt::Display for Usd {
    /// `$0.0123`; four decimals, more for amounts under a hundredth of a cent.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dollars = self.dollars();
        if self.0 != 0 && dollars < 0.0001 {
            write!(f, "${dollars:.7}")
        } else {
            write!(f, "${dollars:.4}")
        }
    }
}

impl Serialize for Usd {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.dollars())
    }
}

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let dollars = f64::deserialize(deserializer)?;
        Usd::from_dollars(dollars).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{dollars} is not an amount of dollars (a number ≥ 0)"
            ))
        })
    }
}

/// What a model charges, in dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million input (prompt) tokens.
    pub input: f64,
    /// Per million output (completion) tokens, reasoning included.
    pub output: f64,
    /// Per million input tokens read from the prompt cache (unset: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
    /// Per million input tokens written to the prompt cache for five minutes (Anthropic
    /// bills 1.25× the input price; unset: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    /// Per million input tokens written to the prompt cache for an hour (Anthropic bills
    /// 2× the input price; unset: the `cache_write` price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h: Option<f64>,
}

impl Price {
    /// A price of `input` and `output` dollars per million tokens, cache kinds unset.
    pub const fn new(input: f64, output: f64) -> Self {
        Price {
            input,
            output,
            cached_input: None,
            cache_write: None,
            cache_write_1h: None,
        }
    }

    /// What one call with `usage` costs: each kind of input token at its own price.
    pub fn cost(&self, usage: &Usage) -> Usd {
        let parts = InputParts::of(usage);
        let write_5m = self.cache_write.unwrap_or(self.input);
        let dollars = (parts.plain as f64 * self.input
            + parts.read as f64 * self.cached_input.unwrap_or(self.input)
            + parts.write_5m as f64 * write_5m
            + parts.write_1h as f64 * self.cache_write_1h.unwrap_or(write_5m)
            + usage.output_tokens as f64 * self.output)
            / 1e6;
        Usd::from_dollars(dollars).unwrap_or_default()
    }

    /// What a call reading `input` tokens and writing `output` would cost at most.
    pub fn estimate(&self, input: u64, output: u64) -> Usd {
        self.cost(&Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        })
    }
}

/// A call's input tokens split by how they are billed; the parts never add up to more
/// than the input (a confused server's counts are clamped, reads first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InputParts {
    /// Billed at the plain input price.
    pub plain: u64,
    /// Read from the cache.
    pub read: u64,
    /// Written to the cache for five minutes.
    pub write_5m: u64,
    /// Written to the cache for an hour.
    pub write_1h: u64,
}

impl InputParts {
    /// The parts of `usage`'s input.
    pub fn of(usage: &Usage) -> Self {
        let read = usage.cached_input_tokens.min(usage.input_tokens);
        let write = usage.cache_write_tokens.min(usage.input_tokens - read);
        let write_1h = usage.cache_write_1h_tokens.min(write);
        InputParts {
            plain: usage.input_tokens - read - write,
            read,
            write_5m: write - write_1h,
            write_1h,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_add_exactly_and_read_as_dollars() {
        let cent = Usd::from_dollars(0.01).unwrap();
        let mut sum = Usd::ZERO;
        for _ in 0..100 {
            sum = sum.saturating_add(cent);
        }
        assert_eq!(sum, Usd::from_dollars(1.0).unwrap());
        assert_eq!(serde_json::to_string(&sum).unwrap(), "1.0");
        assert_eq!(
            serde_json::from_str::<Usd>("0.25").unwrap().nanos(),
            250_000_000
        );
        assert!(serde_json::from_str::<Usd>("-1").is_err());
        assert_eq!(sum.to_string(), "$1.0000");
        assert_eq!(Usd::from_nanos(42).to_string(), "$0.0000000");
    }

    #[test]
    fn a_call_costs_its_tokens_at_the_price() {
        let price = Price::new(2.5, 10.0);
        let mut usage = Usage {
            input_tokens: 12_000,
            output_tokens: 500,
            ..Usage::default()
        };
        // 12,000 × 2.5 / 1e6 + 500 × 10 / 1e6 = 0.03 + 0.005
        assert_eq!(price.cost(&usage), Usd::from_dollars(0.035).unwrap());
        // 10,000 of the input read from the cache: at the input price unless the price
        // says otherwise, then 2,000 × 2.5 + 10,000 × 1.25 + 500 × 10, per million.
        usage.cached_input_tokens = 10_000;
        assert_eq!(price.cost(&usage), Usd::from_dollars(0.035).unwrap());
        let cached = Price {
            cached_input: Some(1.25),
            ..price
        };
        assert_eq!(cached.cost(&usage), Usd::from_dollars(0.0225).unwrap());
        // A cache count above the input (a confused server) never costs less than zero.
        usage.cached_input_tokens = 99_999;
        assert_eq!(cached.cost(&usage), Usd::from_dollars(0.02).unwrap());
    }

    #[test]
    fn every_cache_kind_is_billed_at_its_own_price() {
        // Anthropic's Claude Sonnet 4.5: $3 in, $15 out, reads 0.1×, writes 1.25× / 2×.
        let price = Price {
            cached_input: Some(0.3),
            cache_write: Some(3.75),
            cache_write_1h: Some(6.0),
            ..Price::new(3.0, 15.0)
        };
        let usage = Usage {
            input_tokens: 100_000,
            output_tokens: 1_000,
            cached_input_tokens: 60_000,
            cache_write_tokens: 30_000,
            cache_write_1h_tokens: 10_000,
        };
        assert_eq!(
            InputParts::of(&usage),
            InputParts {
                plain: 10_000,
                read: 60_000,
                write_5m: 20_000,
                write_1h: 10_000
            }
        );
        // 10k × 3 + 60k × 0.3 + 20k × 3.75 + 10k × 6 + 1k × 15, per million.
        let expected = (30_000.0 + 18_000.0 + 75_000.0 + 60_000.0 + 15_000.0) / 1e6;
        assert_eq!(price.cost(&usage), Usd::from_dollars(expected).unwrap());
        // Unset, a one-hour write costs the five-minute write price, and that the input price.
        let five = Price {
            cache_write_1h: None,
            ..price
        };
        let expected = (30_000.0 + 18_000.0 + 112_500.0 + 15_000.0) / 1e6;
        assert_eq!(five.cost(&usage), Usd::from_dollars(expected).unwrap());
        let plain = Price::new(3.0, 15.0);
        assert_eq!(
            plain.cost(&usage),
            Usd::from_dollars((300_000.0 + 15_000.0) / 1e6).unwrap()
        );
        // Counts that overrun the input are clamped: reads first, then writes.
        let confused = Usage {
            input_tokens: 1_000,
            cached_input_tokens: 800,
            cache_write_tokens: 900,
            cache_write_1h_tokens: 5_000,
            ..Usage::default()
        };
        assert_eq!(
            InputParts::of(&confused),
            InputParts {
                plain: 0,
                read: 800,
                write_5m: 0,
                write_1h: 200
            }
        );
    }
}
