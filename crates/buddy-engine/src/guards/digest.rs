//! A tool result read once for the judge: its fingerprint ([`fingerprint`]) and its
//! distinctive tokens ([`tokens`]) from one pass over its bytes where that gives the same
//! values, instead of one pass each. Both are FNV-1a hashes (one multiply per byte, each
//! waiting on the last); in one loop the two chains run side by side on the CPU.
//!
//! The one pass applies when the fingerprint's text is the result itself, trimmed: an
//! ASCII result that echoes none of its call's argument strings and holds no noise.
//! Anything else takes the two functions as they are. Both values are stored (fingerprints
//! with a durable turn's judge memory), so they must be bit for bit the functions' own: a
//! property test holds the one pass to them.

use super::noise::{FNV_START, fingerprint, fnv_byte, holds_no_noise};
use super::tokens::{READ_BYTES, distinctive, tokens};

/// What the judge keeps of one result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultDigest {
    /// [`fingerprint`] of the result.
    pub fingerprint: u64,
    /// [`tokens`] of the result, in the order it gives them.
    pub tokens: Vec<u64>,
}

/// The fingerprint and tokens of `result`, a call's result, whose argument strings are
/// `arg_strings` (what [`fingerprint`] leaves out).
pub fn digest(result: &str, arg_strings: &[String]) -> ResultDigest {
    let trimmed = result.trim();
    if !one_pass_applies(result, arg_strings) {
        return ResultDigest {
            fingerprint: fingerprint(result, arg_strings),
            tokens: tokens(result),
        };
    }
    // ASCII: every byte is a char boundary, a letter or digit is one byte and its lower
    // case is ASCII's (what `tokens` does on ASCII text).
    let from = result.len() - result.trim_start().len();
    let to = from + trimmed.len();
    let bytes = result.as_bytes();
    let read = bytes.len().min(READ_BYTES);
    let mut fp = FNV_START;
    let mut found = Vec::new();
    let (mut token, mut chars, mut has_digit) = (FNV_START, 0usize, false);
    for (i, &b) in bytes[..to.max(read)].iter().enumerate() {
        if (from..to).contains(&i) {
            fp = fnv_byte(fp, b);
        }
        if i >= read {
            continue;
        }
        if b.is_ascii_alphanumeric() {
            token = fnv_byte(token, b.to_ascii_lowercase());
            chars += 1;
            has_digit |= b.is_ascii_digit();
        } else {
            if distinctive(chars, has_digit) {
                found.push(token);
            }
            (token, chars, has_digit) = (FNV_START, 0, false);
        }
    }
    if distinctive(chars, has_digit) {
        found.push(token);
    }
    ResultDigest {
        fingerprint: fp,
        tokens: found,
    }
}

/// Whether [`fingerprint`] hashes `result` trimmed and nothing else, and [`tokens`]
/// reads it byte by byte: an ASCII result with no echo of `arg_strings` and no noise.
fn one_pass_applies(result: &str, arg_strings: &[String]) -> bool {
    let trimmed = result.trim();
    result.is_ascii()
        && !arg_strings.iter().any(|s| trimmed.contains(s.as_str()))
        && holds_no_noise(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two functions the one pass stands for.
    fn apart(result: &str, arg_strings: &[String]) -> ResultDigest {
        ResultDigest {
            fingerprint: fingerprint(result, arg_strings),
            tokens: tokens(result),
        }
    }

    #[test]
    fn a_page_of_orders_gets_what_the_two_functions_give() {
        let mut page = String::from("  Page 3 of the order book\n");
        for i in 0..60 {
            page.push_str(&format!(
                "003.{i:02} order {}: 8 units of part P-{:05} at 15.13 EUR, delivered\n",
                303 + i,
                i * 7919
            ));
        }
        page.push_str("\t \n");
        assert!(one_pass_applies(&page, &[]));
        assert_eq!(digest(&page, &[]), apart(&page, &[]));
        assert!(!digest(&page, &[]).tokens.is_empty());
        let long = page.repeat(8);
        assert!(long.len() > READ_BYTES, "past the tokens' read limit");
        assert_eq!(digest(&long, &[]), apart(&long, &[]));
    }

    #[test]
    fn echo_noise_and_unicode_take_the_two_functions() {
        let args = vec!["step 3 after 48213907".to_owned()];
        for text in [
            "Results for 'step 3 after 48213907': 1 page found.",
            "pending (checked at 2025-01-01T12:00:07Z, check 2)",
            "Straße 12 geöffnet",
            "",
            "   ",
        ] {
            assert!(!one_pass_applies(text, &args) || text.trim().is_empty());
            assert_eq!(digest(text, &args), apart(text, &args), "{text:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn clean_results_take_the_one_pass_and_get_the_same_values(parts in proptest::collection::vec(proptest::sample::select(vec![
            "Kubernetes", "ab12", "x", "-", " ", "\n", "\t", "\r", "/", "858a9d37", "ORDER",
            "delivered", "_", ".", "page", "P-00707", "15.13 EUR", "item", "\u{b}", "\u{c}", "7",
        ]), 0..80), long in 0usize..3) {
            let mut text: String = parts.concat();
            if long > 0 {
                text = text.repeat(300 * long);
            }
            let args = vec!["zzz".to_owned()];
            proptest::prop_assert!(one_pass_applies(&text, &args) || !holds_no_noise(text.trim()));
            proptest::prop_assert_eq!(digest(&text, &args), apart(&text, &args));
        }

        #[test]
        fn one_pass_gives_the_same_fingerprint_and_tokens(parts in proptest::collection::vec(proptest::sample::select(vec![
            "Kubernetes", "ab12", "x", "-", " ", "\n", "\t", "/", "858a9d37", "ORDER", "delivered",
            "_", ".", "page 2", "P-00707", "15.13 EUR", "2025-01-01", "12:00", "35 ms", "check 2",
            "request_id: ab12", "deadbeefcafe12345678", "Straße", "٣٤٥٦", "item-7", "\u{b}", "\u{c}",
        ]), 0..60), args in proptest::collection::vec(proptest::sample::select(vec![
            "item-7", "ab12", "page 2", "", "zzz",
        ]), 0..3), long in 0usize..3) {
            let mut text: String = parts.concat();
            if long > 0 {
                text = text.repeat(300 * long);
            }
            let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
            proptest::prop_assert_eq!(digest(&text, &args), apart(&text, &args));
        }

        #[test]
        fn any_text_gives_the_same_fingerprint_and_tokens(text in "[ -~\t\n]{0,400}|.{0,200}") {
            proptest::prop_assert_eq!(digest(&text, &[]), apart(&text, &[]));
        }
    }
}
