//! Distinctive tokens of a text, for telling a model that follows what it read (its
//! next call carries a name, id or number that first appeared in the latest results)
//! from one that repeats itself.

use super::noise::{FNV_START, fnv_byte, hash};

/// Only the start of a long text is read for tokens (bounds the memory a turn keeps).
pub(super) const READ_BYTES: usize = 16 * 1024;
/// Shortest and longest token.
const MIN_CHARS: usize = 4;
const MAX_CHARS: usize = 64;
/// A token without digits must be at least this long to be distinctive.
const MIN_WORD_CHARS: usize = 6;

/// The distinctive tokens of `text` as hashes: runs of letters and digits of 4 to 64
/// characters that hold a digit (ids, tickets, versions) or are 6 letters or more,
/// lower-cased.
pub fn tokens(text: &str) -> Vec<u64> {
    let mut end = text.len().min(READ_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = &text[..end];
    // Most tool results are ASCII: there a letter or digit is one byte, its lower case is
    // ASCII's and its length its byte count, so runs are found and hashed byte by byte
    // without decoding or allocating (the same hashes, in the same order).
    if text.is_ascii() {
        return text
            .as_bytes()
            .split(|b| !b.is_ascii_alphanumeric())
            .filter(|t| distinctive(t.len(), t.iter().any(u8::is_ascii_digit)))
            .map(|t| {
                t.iter()
                    .fold(FNV_START, |h, b| fnv_byte(h, b.to_ascii_lowercase()))
            })
            .collect();
    }
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| distinctive(t.chars().count(), t.chars().any(|c| c.is_ascii_digit())))
        .map(|t| {
            if t.is_ascii() {
                t.bytes()
                    .fold(FNV_START, |h, b| fnv_byte(h, b.to_ascii_lowercase()))
            } else {
                hash(&t.to_lowercase())
            }
        })
        .collect()
}

/// Whether a run of `chars` letters and digits, holding a digit or not, is a token.
pub(super) fn distinctive(chars: usize, has_digit: bool) -> bool {
    (MIN_CHARS..=MAX_CHARS).contains(&chars) && (has_digit || chars >= MIN_WORD_CHARS)
}

/// The tokens as first written: decoding every character and lower-casing each token
/// into a new string. Kept to hold [`tokens`] to it.
#[cfg(test)]
fn tokens_by_chars(text: &str) -> Vec<u64> {
    let mut end = text.len().min(READ_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end]
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| {
            let n = t.chars().count();
            (MIN_CHARS..=MAX_CHARS).contains(&n)
                && (t.chars().any(|c| c.is_ascii_digit()) || n >= MIN_WORD_CHARS)
        })
        .map(|t| hash(&t.to_lowercase()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_numbers_and_long_words_are_tokens_short_words_are_not() {
        let found = tokens(r#"{"query":"step 7 after 858a9d37","path":"chain/9-c7842419.txt"}"#);
        for t in ["858a9d37", "c7842419", "query"] {
            let is = found.contains(&hash(t));
            assert_eq!(is, t != "query", "{t}");
        }
        assert!(tokens("the cat sat on a mat").is_empty());
        assert_eq!(tokens("Kubernetes"), vec![hash("kubernetes")]);
        assert_eq!(
            tokens(&"x".repeat(100)),
            Vec::<u64>::new(),
            "too long to be a token"
        );
    }

    proptest::proptest! {
        #[test]
        fn the_byte_path_gives_the_hashes_of_the_char_path(parts in proptest::collection::vec(proptest::sample::select(vec![
            "Kubernetes", "ab12", "x", "-", " ", "/", "858a9d37", "ÉCOLE", "Straße", "Ärger", "٣٤٥٦", "ǅungla",
            "İstanbul", "ﬁle", "a1b2c3d4", "ORDER", "delivered", "_", ".", "日本語テキスト", "\u{1F600}",
        ]), 0..40), long in 0usize..3) {
            let mut text: String = parts.concat();
            if long > 0 {
                text = text.repeat(400 * long);
            }
            proptest::prop_assert_eq!(tokens(&text), tokens_by_chars(&text));
        }

        #[test]
        fn any_text_gives_the_same_hashes(text in ".{0,300}") {
            proptest::prop_assert_eq!(tokens(&text), tokens_by_chars(&text));
        }
    }
}
