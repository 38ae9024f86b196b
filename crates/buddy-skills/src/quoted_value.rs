//! A JSON value quoted in a message to the model, bounded: a refusal of a 15 MiB
//! argument names the argument, it does not carry (or even render) it whole.

use std::fmt::Write as _;

use serde_json::Value;

/// The most characters of a value a message quotes.
pub(crate) const QUOTED_VALUE_CHARS: usize = 200;

/// `value` as JSON when that is short; else its start, an ellipsis and its size, written
/// without rendering the whole value first.
pub(crate) fn quoted_value(value: &Value) -> Quoted {
    if let Value::String(text) = value {
        if text.chars().nth(QUOTED_VALUE_CHARS).is_none() {
            return Quoted::Whole;
        }
        let start: String = text.chars().take(QUOTED_VALUE_CHARS).collect();
        let mut shown = serde_json::to_string(&start).unwrap_or_default();
        shown.pop();
        let _ = write!(shown, "…\" ({} characters)", text.chars().count());
        return Quoted::Cut(shown);
    }
    let mut writer = Bounded::default();
    if serde_json::to_writer(&mut writer, value).is_ok() {
        return Quoted::Whole;
    }
    let mut shown = String::from_utf8_lossy(&writer.bytes).into_owned();
    // A cut through a multi-byte character leaves a replacement character: drop it.
    shown = shown.trim_end_matches('\u{FFFD}').to_owned();
    shown.push_str("… (cut)");
    Quoted::Cut(shown)
}

/// Whether a value fits a message whole, or what stands for it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Quoted {
    /// Short enough to quote as it is.
    Whole,
    /// Its start and its size.
    Cut(String),
}

/// A writer that takes [`QUOTED_VALUE_CHARS`] bytes and then refuses the rest.
#[derive(Default)]
struct Bounded {
    bytes: Vec<u8>,
}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = QUOTED_VALUE_CHARS.saturating_sub(self.bytes.len());
        if room == 0 {
            return Err(std::io::Error::other("the quote is full"));
        }
        let taken = buf.len().min(room);
        self.bytes.extend_from_slice(&buf[..taken]);
        Ok(taken)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn short_values_are_quoted_whole() {
        assert_eq!(quoted_value(&json!("abc")), Quoted::Whole);
        assert_eq!(quoted_value(&json!({"a": [1, 2, 3]})), Quoted::Whole);
    }

    #[test]
    fn a_long_string_shows_its_start_and_its_length() {
        let Quoted::Cut(shown) = quoted_value(&json!("é".repeat(1_000_000))) else {
            panic!("a million characters were quoted whole");
        };
        assert!(shown.starts_with("\"éé"), "{shown}");
        assert!(shown.ends_with("…\" (1000000 characters)"), "{shown}");
        assert!(shown.chars().count() < QUOTED_VALUE_CHARS + 40, "{shown}");
    }

    #[test]
    fn a_large_object_is_cut_after_its_start() {
        let big = json!({"rows": vec!["x"; 100_000]});
        let Quoted::Cut(shown) = quoted_value(&big) else {
            panic!("a large object was quoted whole");
        };
        assert!(shown.starts_with("{\"rows\":[\"x\""), "{shown}");
        assert!(shown.ends_with("… (cut)"));
        assert!(shown.len() <= QUOTED_VALUE_CHARS + 10);
    }
}
