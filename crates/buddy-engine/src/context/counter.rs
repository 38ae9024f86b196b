//! Token counting: exact BPE for OpenAI model families (tiktoken's vocabularies are
//! embedded, so this works offline), a documented estimate for everything else.

use std::sync::Arc;

use buddy_core::{Attachment, Message, ToolSpec};
use serde_json::Value;
use tiktoken_rs::CoreBPE;
use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};

/// Counts the tokens a request will use.
pub trait TokenCounter: Send + Sync {
    /// The encoding's name (`o200k_base`, `cl100k_base`, `estimate`).
    fn name(&self) -> &'static str;
    /// Tokens of a plain text.
    fn text(&self, text: &str) -> usize;
    /// Tokens of one message, with its framing.
    fn message(&self, message: &Message) -> usize;
    /// A cheap upper bound on [`message`](Self::message), when counting exactly costs
    /// far more than the bound (BPE); `None` when the count itself is cheap.
    fn message_bound(&self, _message: &Message) -> Option<usize> {
        None
    }
    /// Tokens the tool definitions add to a request.
    fn tools(&self, tools: &[ToolSpec]) -> usize;
    /// A cheap upper bound on [`tools`](Self::tools), like [`message_bound`](Self::message_bound).
    fn tools_bound(&self, _tools: &[ToolSpec]) -> Option<usize> {
        None
    }
    /// Tokens every request adds for the model's reply to start.
    fn reply_priming(&self) -> usize {
        3
    }
}

/// Which OpenAI family a BPE counter serves; their tool framing differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// gpt-4o, gpt-4.1, o-series, gpt-5: o200k_base.
    O200k,
    /// gpt-4, gpt-3.5-turbo: cl100k_base.
    Cl100k,
}

/// Exact counts for OpenAI models, following the message and tool formulas the OpenAI
/// cookbook verified against the API ("How to count tokens with tiktoken").
pub struct BpeCounter {
    bpe: &'static CoreBPE,
    family: Family,
}

/// Framing of each message: `<|start|>{role}\n{content}<|end|>\n` (cookbook: 3 tokens).
const TOKENS_PER_MESSAGE: usize = 3;
/// A `name` field costs one more token (cookbook).
const TOKENS_PER_NAME: usize = 1;

impl BpeCounter {
    /// The o200k_base counter (gpt-4o and later).
    pub fn o200k() -> Self {
        BpeCounter {
            bpe: tiktoken_rs::o200k_base_singleton(),
            family: Family::O200k,
        }
    }

    /// The cl100k_base counter (gpt-4, gpt-3.5-turbo).
    pub fn cl100k() -> Self {
        BpeCounter {
            bpe: tiktoken_rs::cl100k_base_singleton(),
            family: Family::Cl100k,
        }
    }

    /// Tokens of a chat given as (role, name, content) parts, exactly as the cookbook
    /// counts them: 3 per message, its values, 1 per name, and 3 to prime the reply.
    pub fn chat(&self, parts: &[(&str, Option<&str>, &str)]) -> usize {
        parts
            .iter()
            .map(|(role, name, content)| {
                TOKENS_PER_MESSAGE
                    + self.text(role)
                    + self.text(content)
                    + name.map_or(0, |n| TOKENS_PER_NAME + self.text(n))
            })
            .sum::<usize>()
            + self.reply_priming()
    }

    /// Tokens of `message` under the cookbook's framing, its texts counted by `text`.
    fn message_with(&self, message: &Message, text: impl Fn(&str) -> usize) -> usize {
        match message {
            Message::System { content } => TOKENS_PER_MESSAGE + 1 + text(content),
            Message::User {
                content,
                attachments,
            } => TOKENS_PER_MESSAGE + 1 + text(content) + attachments.len() * Attachment::TOKENS,
            Message::Note { content } => TOKENS_PER_MESSAGE + 1 + text(content),
            Message::Tool { content, .. } => TOKENS_PER_MESSAGE + 1 + text(content),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                // The API does not publish its tool-call framing; name, arguments and a
                // few tokens of structure per call is a close, slightly high estimate.
                TOKENS_PER_MESSAGE
                    + 1
                    + content.as_deref().map_or(0, &text)
                    + tool_calls
                        .iter()
                        .map(|c| 4 + text(&c.name) + text(&c.arguments))
                        .sum::<usize>()
            }
        }
    }

    fn property_tokens(
        &self,
        properties: &serde_json::Map<String, Value>,
        text: &impl Fn(&str) -> usize,
    ) -> usize {
        let (enum_init, enum_item) = (3usize, 3usize);
        properties
            .iter()
            .map(|(key, property)| {
                let kind = property.get("type").and_then(Value::as_str).unwrap_or("");
                let description = property
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let description = description.strip_suffix('.').unwrap_or(description);
                let enum_tokens =
                    property
                        .get("enum")
                        .and_then(Value::as_array)
                        .map_or(0, |items| {
                            items
                                .iter()
                                .map(|item| enum_item + item.as_str().map_or(1, text))
                                .sum::<usize>()
                                .saturating_sub(enum_init)
                        });
                3 + enum_tokens + text(&format!("{key}:{kind}:{description}"))
            })
            .sum()
    }

    /// Tokens of `tools` under the cookbook's formula, their texts counted by `text`.
    fn tools_with(&self, tools: &[ToolSpec], text: &impl Fn(&str) -> usize) -> usize {
        if tools.is_empty() {
            return 0;
        }
        let func_init = match self.family {
            Family::O200k => 7,
            Family::Cl100k => 10,
        };
        let (prop_init, func_end) = (3, 12);
        tools
            .iter()
            .map(|tool| {
                let description = tool
                    .description
                    .strip_suffix('.')
                    .unwrap_or(&tool.description);
                let properties = tool.parameters.get("properties").and_then(Value::as_object);
                func_init
                    + text(&format!("{}:{description}", tool.name))
                    + properties
                        .filter(|p| !p.is_empty())
                        .map_or(0, |p| prop_init + self.property_tokens(p, text))
            })
            .sum::<usize>()
            + func_end
    }
}

impl TokenCounter for BpeCounter {
    fn name(&self) -> &'static str {
        match self.family {
            Family::O200k => "o200k_base",
            Family::Cl100k => "cl100k_base",
        }
    }

    fn text(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        self.bpe.encode_ordinary(text).len()
    }

    fn message(&self, message: &Message) -> usize {
        self.message_with(message, |text| self.text(text))
    }

    /// The message formula with every text's tokens taken as its bytes: a BPE token is at
    /// least one byte, so this is never below the exact count.
    fn message_bound(&self, message: &Message) -> Option<usize> {
        Some(self.message_with(message, str::len))
    }

    /// The cookbook's formula (API-verified for gpt-4 and gpt-4o families).
    fn tools(&self, tools: &[ToolSpec]) -> usize {
        self.tools_with(tools, &|text| self.text(text))
    }

    /// The tool formula with every text's tokens taken as its bytes (never below it).
    fn tools_bound(&self, tools: &[ToolSpec]) -> Option<usize> {
        Some(self.tools_with(tools, &str::len))
    }
}

/// An estimate for models without a public tokenizer (Claude, Llama, Qwen, Mistral,
/// SmolLM…), by character class rather than length, because the tokenizers that matter
/// most here (small vocabularies) spend far more tokens on digits, punctuation and junk
/// than on words: a run of letters costs one token plus one per further four letters
/// (one per two when it has too few vowels to be a word), every digit, punctuation mark and line break one, every other character one per two
/// UTF-8 bytes; a single space before a word is free. Plus 4 tokens of framing per
/// message. It reads 1.3–2 times the larger of cl100k_base's and o200k_base's counts on
/// prose, code, JSON, digits and non-ASCII text, and no less on random junk (see the
/// tests). When it is still too low, the provider's refusal makes buddy trim harder and
/// retry (see `Turn::model_call`).
pub struct EstimateCounter;

/// Letters one token covers after a run's first letter.
const LETTERS_PER_TOKEN: usize = 4;

/// Which ASCII letters count as vowels (`aeiouy`, either case), by byte.
const VOWEL: [bool; 256] = {
    let mut table = [false; 256];
    let vowels = b"aeiouyAEIOUY";
    let mut i = 0;
    while i < vowels.len() {
        table[vowels[i] as usize] = true;
        i += 1;
    }
    table
};

/// Tokens of a run of `letters` ASCII letters with `vowels` vowels.
fn estimate_word(letters: usize, vowels: usize) -> usize {
    match letters {
        0 => 0,
        // Too few vowels for a word: tokenizers split such runs two letters at a time.
        _ if vowels * 4 < letters => letters.div_ceil(2),
        _ => 1 + (letters - 1) / LETTERS_PER_TOKEN,
    }
}

impl TokenCounter for EstimateCounter {
    fn name(&self) -> &'static str {
        "estimate"
    }

    /// One pass over the bytes (no UTF-8 decoding: a character's lead byte tells its
    /// length); the same count as reading it character by character (a property test
    /// holds it to that), several times faster on long tool results.
    fn text(&self, text: &str) -> usize {
        let mut tokens = 0;
        let (mut letters, mut vowels) = (0usize, 0usize);
        let mut spaces = 0usize;
        for &b in text.as_bytes() {
            if b.is_ascii_alphabetic() {
                letters += 1;
                vowels += usize::from(VOWEL[usize::from(b)]);
                spaces = 0;
                continue;
            }
            // A continuation byte belongs to the character its lead byte counted.
            if b & 0xC0 == 0x80 {
                continue;
            }
            tokens += estimate_word(letters, vowels);
            (letters, vowels) = (0, 0);
            if b == b' ' {
                // One space joins the next word; a run of them is a token of its own.
                spaces += 1;
                if spaces == 2 {
                    tokens += 1;
                }
                continue;
            }
            spaces = 0;
            tokens += match b {
                0x00..=0x7F => 1,
                // Lead bytes of 2-, 3- and 4-byte characters: half their length, rounded up.
                0xC0..=0xDF => 1,
                _ => 2,
            };
        }
        tokens + estimate_word(letters, vowels)
    }

    fn message(&self, message: &Message) -> usize {
        let body = match message {
            Message::Assistant {
                content,
                tool_calls,
            } => {
                content.as_deref().map_or(0, |c| self.text(c))
                    + tool_calls
                        .iter()
                        .map(|c| 4 + self.text(&c.name) + self.text(&c.arguments))
                        .sum::<usize>()
            }
            other => {
                other.text().map_or(0, |t| self.text(t))
                    + other.attachments().len() * Attachment::TOKENS
            }
        };
        4 + body
    }

    fn tools(&self, tools: &[ToolSpec]) -> usize {
        tools
            .iter()
            .map(|t| {
                10 + self.text(&t.name)
                    + self.text(&t.description)
                    + self.text(&t.parameters.to_string())
            })
            .sum()
    }
}

/// The version of buddy's counting formulas (message framing, tools, the estimate):
/// raised whenever a count would come out differently, so that counts stored under an
/// older one are made again.
pub const COUNT_FORMULA: u32 = 1;

/// What counts made by `counter` are kept under: its encoding and [`COUNT_FORMULA`]
/// (`o200k_base/1`).
pub fn count_key(counter: &dyn TokenCounter) -> String {
    format!("{}/{COUNT_FORMULA}", counter.name())
}

/// The counter for `model`: o200k_base or cl100k_base for OpenAI model names (as
/// tiktoken maps them), the estimate otherwise.
pub fn counter_for_model(model: &str) -> Arc<dyn TokenCounter> {
    match get_tokenizer(model) {
        Some(Tokenizer::O200kBase) => Arc::new(BpeCounter::o200k()),
        Some(Tokenizer::Cl100kBase) => Arc::new(BpeCounter::cl100k()),
        _ => Arc::new(EstimateCounter),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The estimate read character by character: what the byte loop must equal.
    fn by_chars(text: &str) -> usize {
        let mut tokens = 0;
        let (mut letters, mut vowels) = (0usize, 0usize);
        let mut spaces = 0usize;
        for c in text.chars() {
            if c.is_ascii_alphabetic() {
                letters += 1;
                vowels += usize::from(matches!(
                    c.to_ascii_lowercase(),
                    'a' | 'e' | 'i' | 'o' | 'u' | 'y'
                ));
                spaces = 0;
                continue;
            }
            tokens += estimate_word(letters, vowels);
            (letters, vowels) = (0, 0);
            if c == ' ' {
                spaces += 1;
                if spaces == 2 {
                    tokens += 1;
                }
                continue;
            }
            spaces = 0;
            tokens += if c.is_ascii() {
                1
            } else {
                c.len_utf8().div_ceil(2)
            };
        }
        tokens + estimate_word(letters, vowels)
    }

    proptest::proptest! {
        #[test]
        fn the_byte_loop_counts_as_the_character_loop(text in "\\PC{0,200}") {
            proptest::prop_assert_eq!(EstimateCounter.text(&text), by_chars(&text));
        }

        /// What lets the engine count a message exactly only when the window needs it.
        #[test]
        fn a_bpe_bound_is_never_below_the_exact_count(
            text in "(\\PC|[ \n\t0-9{}\":,]){0,300}",
            name in "[a-z_]{1,20}",
        ) {
            let messages = [
                Message::user(text.as_str()),
                Message::tool_result("c1", text.as_str(), false),
                Message::Assistant {
                    content: Some(text.clone()),
                    tool_calls: vec![buddy_core::ToolCall::new("c1", &name, &text)],
                },
            ];
            let tools = [ToolSpec {
                name: name.clone(),
                description: text.clone(),
                parameters: serde_json::json!({"type": "object", "properties": {
                    "q": {"type": "string", "description": text},
                    "mode": {"type": "string", "enum": [text, "fast", name]},
                }}),
            }];
            for counter in [BpeCounter::o200k(), BpeCounter::cl100k()] {
                for message in &messages {
                    let bound = counter.message_bound(message);
                    proptest::prop_assert!(bound >= Some(counter.message(message)), "{message:?}");
                }
                proptest::prop_assert!(counter.tools_bound(&tools) >= Some(counter.tools(&tools)));
            }
        }
    }

    #[test]
    fn the_byte_loop_counts_as_the_character_loop_on_known_text() {
        for text in [
            "",
            "  ",
            "héllo wörld",
            "日本語のテキスト",
            "emoji 🎉🎉 here",
            "rhythm xyzzy",
            "{\"a\": [1, 2]}",
        ] {
            assert_eq!(EstimateCounter.text(text), by_chars(text), "{text}");
        }
    }

    #[test]
    fn models_map_to_their_encodings() {
        assert_eq!(counter_for_model("gpt-4o-mini").name(), "o200k_base");
        assert_eq!(counter_for_model("gpt-4.1").name(), "o200k_base");
        assert_eq!(counter_for_model("gpt-4").name(), "cl100k_base");
        assert_eq!(counter_for_model("gpt-3.5-turbo").name(), "cl100k_base");
        assert_eq!(counter_for_model("claude-sonnet-4-5").name(), "estimate");
        assert_eq!(
            counter_for_model("scripted:get_time_forever").name(),
            "estimate"
        );
    }

    #[test]
    fn the_estimate_counts_by_character_class() {
        assert_eq!(EstimateCounter.text(""), 0);
        assert_eq!(EstimateCounter.text("abc"), 1);
        assert_eq!(EstimateCounter.text("abcdefg"), 2);
        assert_eq!(EstimateCounter.text("the fox"), 2);
        assert_eq!(EstimateCounter.text("2026-11-22"), 10);
        assert_eq!(EstimateCounter.text("a  b"), 3);
        assert_eq!(EstimateCounter.text("日本"), 4);
    }

    /// Deterministic junk: letters, digits and symbols in random order, as a small
    /// model's invented arguments look.
    fn junk(len: usize, seed: u64) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzQWXZ0123456789_-./:{}\"=,;!?#@ ";
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ALPHABET[((state >> 33) % ALPHABET.len() as u64) as usize] as char
            })
            .collect()
    }

    #[test]
    fn the_estimate_stays_above_a_real_tokenizer_on_every_kind_of_text() {
        let prose = "The borrow checker is the part of the Rust compiler that enforces ownership and \
                     borrowing rules. It makes sure every reference is valid for as long as it is used, \
                     and that no data is changed while it is shared. ";
        let code = "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * 2).collect();\n    println!(\"{v:?}\");\n}\n";
        let json = r#"{"city":"Paris","temp_c":14.5,"wind_kmh":20,"conditions":["light rain","cloudy"],"id":"a8f3-11c2"}"#;
        let cl100k = BpeCounter::cl100k();
        let o200k = BpeCounter::o200k();
        // (kind, text, lowest ratio allowed): uniformly random characters are the worst
        // case; the estimate must still not fall below the tokenizer there.
        let samples = [
            ("prose", prose.repeat(20), 1.3),
            ("code", code.repeat(20), 1.3),
            ("json", json.repeat(20), 1.3),
            ("junk", junk(4000, 7), 1.0),
            ("digits", "1234567890 ".repeat(200), 1.3),
            (
                "non-ascii",
                "Größenänderung für Straßen 東京都 ".repeat(50),
                1.3,
            ),
        ];
        for (kind, text, lowest) in samples {
            let estimate = EstimateCounter.text(&text) as f64;
            let real = cl100k.text(&text).max(o200k.text(&text)) as f64;
            let ratio = estimate / real;
            assert!(
                (lowest..=3.0).contains(&ratio),
                "{kind}: estimate {estimate} vs tokenizer {real} (ratio {ratio:.2})"
            );
        }
    }

    /// Counts are stored with messages and reused while [`COUNT_FORMULA`] stays the same:
    /// if any figure here changes, the formula changed — raise `COUNT_FORMULA` (and this
    /// table), or conversations stored before would be fitted with stale counts.
    #[test]
    fn counts_kept_under_this_formula_stay_the_same() {
        assert_eq!(COUNT_FORMULA, 1);
        let messages = [
            Message::system("You are a careful assistant."),
            Message::user("Wie spät ist es in Zürich? 🕰"),
            Message::Assistant {
                content: Some("Looking.".into()),
                tool_calls: vec![buddy_core::ToolCall::new(
                    "call_1",
                    "clock",
                    r#"{"city":"Zürich","format":"24h"}"#,
                )],
            },
            Message::tool_result("call_1", "14:05 CET", false),
            Message::note("[buddy] 2 earlier messages left out"),
        ];
        let tools = [ToolSpec {
            name: "clock".into(),
            description: "The time in a city.".into(),
            parameters: serde_json::json!({"type": "object", "properties": {
                "city": {"type": "string", "description": "The city."},
                "format": {"type": "string", "enum": ["12h", "24h"]}}}),
        }];
        let counters: [&dyn TokenCounter; 3] = [
            &BpeCounter::o200k(),
            &BpeCounter::cl100k(),
            &EstimateCounter,
        ];
        let got: Vec<(Vec<usize>, usize)> = counters
            .iter()
            .map(|c| {
                (
                    messages.iter().map(|m| c.message(m)).collect(),
                    c.tools(&tools),
                )
            })
            .collect();
        // o200k_base, cl100k_base, the estimate: each message, then the tool.
        assert_eq!(
            got,
            vec![
                (vec![10, 14, 23, 8, 13], 48),
                (vec![10, 17, 23, 8, 13], 51),
                (vec![13, 17, 36, 10, 15], 100),
            ]
        );
    }
}
