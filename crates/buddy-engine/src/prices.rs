//! What models cost: a built-in table of common models' list prices, and the operator's
//! own prices beside it (which win).

use buddy_core::Price;

use crate::glob::{glob_match, without_org};

/// How a provider bills writes to its prompt cache.
#[derive(Clone, Copy)]
enum Writes {
    /// At the input price (OpenAI and Google cache by themselves, writes cost nothing more).
    AtInput,
    /// Anthropic: 1.25× the input price for five minutes, 2× for an hour.
    Anthropic,
}

/// (model-name pattern, dollars per million input tokens, per million output tokens, per
/// million cached input tokens read, how cache writes are billed), most specific first.
/// Sources: OpenAI's, Anthropic's and Google's published list prices (standard tier,
/// 2025); set your own in buddy.toml when yours differ.
const PRICES: &[(&str, f64, f64, f64, Writes)] = &[
    ("gpt-5-nano*", 0.05, 0.40, 0.005, Writes::AtInput),
    ("gpt-5-mini*", 0.25, 2.00, 0.025, Writes::AtInput),
    ("gpt-5*", 1.25, 10.00, 0.125, Writes::AtInput),
    ("gpt-4.1-nano*", 0.10, 0.40, 0.025, Writes::AtInput),
    ("gpt-4.1-mini*", 0.40, 1.60, 0.1, Writes::AtInput),
    ("gpt-4.1*", 2.00, 8.00, 0.5, Writes::AtInput),
    ("gpt-4o-mini*", 0.15, 0.60, 0.075, Writes::AtInput),
    ("gpt-4o*", 2.50, 10.00, 1.25, Writes::AtInput),
    ("o4-mini*", 1.10, 4.40, 0.275, Writes::AtInput),
    ("o3-mini*", 1.10, 4.40, 0.55, Writes::AtInput),
    ("o3*", 2.00, 8.00, 0.5, Writes::AtInput),
    ("o1*", 15.00, 60.00, 7.5, Writes::AtInput),
    ("claude-opus-4-5*", 5.00, 25.00, 0.5, Writes::Anthropic),
    ("claude-opus-4*", 15.00, 75.00, 1.5, Writes::Anthropic),
    ("claude-sonnet-4*", 3.00, 15.00, 0.3, Writes::Anthropic),
    ("claude-3-7-sonnet*", 3.00, 15.00, 0.3, Writes::Anthropic),
    ("claude-haiku-4-5*", 1.00, 5.00, 0.1, Writes::Anthropic),
    ("claude-3-5-haiku*", 0.80, 4.00, 0.08, Writes::Anthropic),
    ("claude-3-haiku*", 0.25, 1.25, 0.03, Writes::Anthropic),
    ("gemini-2.5-pro*", 1.25, 10.00, 0.31, Writes::AtInput),
    ("gemini-2.5-flash-lite*", 0.10, 0.40, 0.025, Writes::AtInput),
    ("gemini-2.5-flash*", 0.30, 2.50, 0.075, Writes::AtInput),
];

/// The built-in price of `model`, if buddy knows it (`openai/gpt-4o` names `gpt-4o`).
pub fn default_price(model: &str) -> Option<Price> {
    builtin(without_org(&model.to_ascii_lowercase()))
}

/// The built-in price of the model named `base` (lower case, no org prefix).
fn builtin(base: &str) -> Option<Price> {
    PRICES
        .iter()
        .find(|(pattern, ..)| glob_match(pattern, base))
        .map(|&(_, input, output, cached, writes)| {
            let (cache_write, cache_write_1h) = match writes {
                Writes::AtInput => (None, None),
                Writes::Anthropic => (Some(input * 1.25), Some(input * 2.0)),
            };
            Price {
                cached_input: Some(cached),
                cache_write,
                cache_write_1h,
                ..Price::new(input, output)
            }
        })
}

/// The operator's prices, by provider and model pattern, in front of the built-in table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PriceTable {
    /// (provider name or `None` for any, model pattern, price); first match wins.
    entries: Vec<(Option<String>, String, Price)>,
}

impl PriceTable {
    /// Adds a price for the models matching `pattern` (a `*` glob) of `provider` (or of
    /// every provider); earlier entries win.
    pub fn add(&mut self, provider: Option<&str>, pattern: &str, price: Price) {
        self.entries.push((
            provider.map(str::to_owned),
            pattern.to_ascii_lowercase(),
            price,
        ));
    }

    /// The price of `model` on `provider`: the operator's, else the built-in one.
    pub fn price(&self, provider: &str, model: &str) -> Option<Price> {
        let lower = model.to_ascii_lowercase();
        self.configured(provider, model)
            .or_else(|| builtin(without_org(&lower)))
    }

    /// The operator's own price of `model` on `provider`, never a list price: for a
    /// model that costs nothing unless the operator says so (buddy's scripted model,
    /// whatever name it answers under).
    pub fn configured(&self, provider: &str, model: &str) -> Option<Price> {
        let lower = model.to_ascii_lowercase();
        let base = without_org(&lower);
        self.entries
            .iter()
            .find(|(p, pattern, _)| {
                p.as_deref().is_none_or(|p| p == provider)
                    && (glob_match(pattern, &lower) || glob_match(pattern, base))
            })
            .map(|(_, _, price)| *price)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_models_have_prices_and_the_most_specific_wins() {
        assert_eq!(default_price("gpt-4o-mini").map(|p| p.input), Some(0.15));
        assert_eq!(
            default_price("gpt-4o-2024-08-06").map(|p| p.output),
            Some(10.0)
        );
        assert_eq!(
            default_price("openai/gpt-4.1-mini").map(|p| p.input),
            Some(0.40)
        );
        assert_eq!(
            default_price("claude-sonnet-4-5").map(|p| p.output),
            Some(15.0)
        );
        assert_eq!(
            default_price("qwen2.5:7b"),
            None,
            "a local model has no list price"
        );
        assert_eq!(default_price("scripted:chain_3_steps"), None);
    }

    #[test]
    fn claude_cache_writes_cost_more_than_input_and_openai_writes_nothing_extra() {
        let sonnet = default_price("claude-sonnet-4-5-20250929").unwrap();
        assert_eq!(
            (
                sonnet.cached_input,
                sonnet.cache_write,
                sonnet.cache_write_1h
            ),
            (Some(0.3), Some(3.75), Some(6.0))
        );
        let haiku = default_price("claude-haiku-4-5").unwrap();
        assert_eq!(
            (haiku.cache_write, haiku.cache_write_1h),
            (Some(1.25), Some(2.0))
        );
        let opus = default_price("anthropic/claude-opus-4-5").unwrap();
        assert_eq!((opus.input, opus.cache_write), (5.0, Some(6.25)));
        let gpt = default_price("gpt-5.1").unwrap();
        assert_eq!(
            (gpt.cached_input, gpt.cache_write, gpt.cache_write_1h),
            (Some(0.125), None, None)
        );
        for (pattern, input, _, cached, _) in PRICES {
            assert!(
                cached < input,
                "{pattern}: a cache read costs less than input"
            );
        }
    }

    #[test]
    fn the_operators_prices_win_per_provider() {
        let mut table = PriceTable::default();
        let free = Price::new(0.0, 0.0);
        let discounted = Price::new(1.0, 4.0);
        table.add(Some("azure"), "gpt-4o*", discounted);
        table.add(None, "qwen*", free);
        assert_eq!(table.price("azure", "gpt-4o"), Some(discounted));
        assert_eq!(table.price("openai", "gpt-4o").map(|p| p.input), Some(2.5));
        assert_eq!(table.price("ollama", "qwen2.5:7b"), Some(free));
        assert_eq!(table.price("ollama", "llama3"), None);
    }
}
