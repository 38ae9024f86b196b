//! Distinctive tokens of a text, for telling a model that follows what it read (its
//! next call carries a name, id or number that first appeared in the latest results)
//! from one that repeats itself.

use super::noise::hash;

/// Only the start of a long text is read for tokens (bounds the memory a turn keeps).
const READ_BYTES: usize = 16 * 1024;
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
}
