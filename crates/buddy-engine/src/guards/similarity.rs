//! What counts as "alike" for the loop guards. *Arguments* and *answer texts* are
//! compared loosely, after normalising case, whitespace and digits: short texts
//! (arguments) by character trigrams, long ones (answers) by word pairs, because the
//! trigrams of any two long texts in one language overlap heavily even when they say
//! different things. Tool *results* are never compared loosely: see `noise.rs` for what
//! in a result is not information.

use std::collections::HashSet;

/// Lower-cases, collapses whitespace and maps every digit to `#`.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last_space = true;
    for c in text.chars() {
        if c.is_whitespace() {
            if !last_space {
                out.push(' ');
                last_space = true;
            }
            continue;
        }
        last_space = false;
        if c.is_ascii_digit() {
            out.push('#');
        } else if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

/// Trigram set of an already normalised text.
pub fn trigrams(normalized: &str) -> HashSet<[char; 3]> {
    let chars: Vec<char> = normalized.chars().collect();
    if chars.len() < 3 {
        let mut padded = ['\0'; 3];
        for (slot, c) in padded.iter_mut().zip(chars) {
            *slot = c;
        }
        return HashSet::from([padded]);
    }
    chars.windows(3).map(|w| [w[0], w[1], w[2]]).collect()
}

/// Similarity in 0.0..=1.0 of two normalised texts (1.0 = same trigrams).
pub fn similarity(a: &str, b: &str) -> f64 {
    if a == b {
        return 1.0;
    }
    let (ta, tb) = (trigrams(a), trigrams(b));
    let inter = ta.intersection(&tb).count();
    let union = ta.len() + tb.len() - inter;
    if union == 0 {
        1.0
    } else {
        inter as f64 / union as f64
    }
}

/// True when two calls' canonical arguments are the same arguments varied a little:
/// exactly one value differs, and only by growing or shrinking by whole words around
/// the same text (a query rewritten word by word). Two calls that differ in two values
/// (a file's name and its content), or in a counter (`page 1` -> `page 2`), are two
/// different actions: a new action is progress, whatever it returns.
pub fn args_near(a_canonical: &str, b_canonical: &str) -> bool {
    one_value_differs(a_canonical, b_canonical, |a, b| match (a, b) {
        (Text::Str(a), Text::Str(b)) | (Text::Raw(a), Text::Raw(b)) => grew_by_words(a, b),
        _ => false,
    })
}

/// True when two calls' canonical arguments differ in one value, and only by its digits
/// (a counter) or by growing by whole words: the looser likeness the repeated-answer check
/// uses, where the same answer text already says the model has answered.
pub fn args_counted_or_grown(a_canonical: &str, b_canonical: &str) -> bool {
    one_value_differs(a_canonical, b_canonical, |a, b| {
        let (a, b) = (a.text(), b.text());
        normalize(&a) == normalize(&b) || grew_by_words(&a, &b)
    })
}

/// One differing value of two calls' arguments: a JSON string, any other JSON value (as
/// its text), or the whole arguments when they are not a JSON object.
enum Text<'a> {
    Str(&'a str),
    Json(&'a serde_json::Value),
    Raw(&'a str),
}

impl<'a> Text<'a> {
    fn of(value: &'a serde_json::Value) -> Self {
        match value {
            serde_json::Value::String(s) => Text::Str(s),
            other => Text::Json(other),
        }
    }

    fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Text::Str(s) | Text::Raw(s) => std::borrow::Cow::Borrowed(s),
            Text::Json(v) => std::borrow::Cow::Owned(v.to_string()),
        }
    }
}

/// `alike` of the one value two canonical argument objects differ in (the same keys,
/// every other value equal); of the whole texts when they are not JSON objects. False
/// when the arguments are equal or differ in more than one value.
fn one_value_differs(a: &str, b: &str, alike: impl Fn(Text<'_>, Text<'_>) -> bool) -> bool {
    use serde_json::Value;
    if a == b {
        return false;
    }
    match (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) {
        (Ok(Value::Object(x)), Ok(Value::Object(y))) => {
            if x.len() != y.len() || x.keys().any(|k| !y.contains_key(k)) {
                return false;
            }
            let mut differing = x.iter().filter(|(k, v)| y.get(*k) != Some(*v));
            match (differing.next(), differing.next()) {
                (Some((key, left)), None) => y
                    .get(key)
                    .is_some_and(|right| alike(Text::of(left), Text::of(right))),
                _ => false,
            }
        }
        (Ok(Value::Object(_)), _) | (_, Ok(Value::Object(_))) => false,
        _ => alike(Text::Raw(a), Text::Raw(b)),
    }
}

/// True when one text is the other with whole words added before or after it (the
/// shorter at least [`MIN_GROWN_CHARS`] long, compared case- and space-insensitively).
fn grew_by_words(a: &str, b: &str) -> bool {
    let (na, nb) = (normalize(a), normalize(b));
    let (short, long) = if na.len() <= nb.len() {
        (na, nb)
    } else {
        (nb, na)
    };
    if short.len() < MIN_GROWN_CHARS || short == long {
        return false;
    }
    long.strip_prefix(short.as_str())
        .is_some_and(|rest| rest.starts_with(' '))
        || long
            .strip_suffix(short.as_str())
            .is_some_and(|rest| rest.ends_with(' '))
}

/// The shortest text whose growth by whole words counts as a near-variation.
const MIN_GROWN_CHARS: usize = 6;

/// Word pairs of an already normalised text (single words for one-word texts).
fn word_pairs(normalized: &str) -> HashSet<(&str, &str)> {
    let words: Vec<&str> = normalized.split(' ').filter(|w| !w.is_empty()).collect();
    if words.len() < 2 {
        return words.iter().map(|w| (*w, "")).collect();
    }
    words.windows(2).map(|w| (w[0], w[1])).collect()
}

/// Similarity in 0.0..=1.0 of two normalised long texts, by their word pairs.
pub fn text_similarity(a: &str, b: &str) -> f64 {
    if a == b {
        return 1.0;
    }
    let (pa, pb) = (word_pairs(a), word_pairs(b));
    let inter = pa.intersection(&pb).count();
    let union = pa.len() + pb.len() - inter;
    if union == 0 {
        1.0
    } else {
        inter as f64 / union as f64
    }
}

/// The string values inside a call's JSON arguments (at any depth), longest first:
/// what a result that merely echoes the request would contain.
pub fn arg_strings(raw_arguments: &str) -> Vec<String> {
    super::canonical::strings_of(
        super::canonical::parse(raw_arguments).as_ref(),
        MIN_ECHO_CHARS,
    )
}

/// Argument strings shorter than this are not treated as echoes (removing a one-letter
/// string would take letters out of unrelated words).
pub(crate) const MIN_ECHO_CHARS: usize = 2;
/// Answer-text similarity (word pairs) above which two rounds said the same thing.
pub const NEAR_ANSWER: f64 = 0.7;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_folds_case_space_and_digits() {
        assert_eq!(normalize("  Page 12\n\tof  30 "), "page ## of ##");
    }

    #[test]
    fn one_value_growing_by_words_is_near_and_a_counter_is_a_new_action() {
        assert!(args_near(
            r#"{"q":"libfoo changelog"}"#,
            r#"{"q":"libfoo changelog 0.4"}"#
        ));
        assert!(args_near(
            r#"{"n":10,"q":"weather today"}"#,
            r#"{"n":10,"q":"paris weather today"}"#
        ));
        assert!(args_near("libfoo changelog", "libfoo changelog now"));
        // Counting up is doing something new: reading the next page, the next file.
        assert!(!args_near(r#"{"page":1}"#, r#"{"page":2}"#));
        assert!(!args_near(r#"{"q":"attempt 1"}"#, r#"{"q":"attempt 2"}"#));
        assert!(!args_near(r#"{"q":"step 1"}"#, r#"{"q":"step 10"}"#));
        assert!(!args_near(
            r#"{"path":"src/main.rs"}"#,
            r#"{"path":"Cargo.toml"}"#
        ));
        assert!(!args_near(r#"{"q":"weather"}"#, r#"{"q":"weather"}"#));
        // Rewording is a new question, and two values changed are a new action.
        assert!(!args_near(
            r#"{"q":"weather in paris today"}"#,
            r#"{"q":"weather in paris now"}"#
        ));
        assert!(!args_near(
            r#"{"content":"part one","path":"notes.txt"}"#,
            r#"{"content":"part one more","path":"notes2.txt"}"#
        ));
        assert!(
            !args_near(r#"{"q":"rust"}"#, r#"{"q":"rust async"}"#),
            "too short to tell"
        );
    }

    #[test]
    fn counted_or_grown_also_takes_counters() {
        assert!(args_counted_or_grown(r#"{"page":1}"#, r#"{"page":2}"#));
        assert!(args_counted_or_grown(
            r#"{"q":"tokio details 1"}"#,
            r#"{"q":"tokio details 2"}"#
        ));
        assert!(args_counted_or_grown(
            r#"{"q":"weather"}"#,
            r#"{"q":"weather today"}"#
        ));
        assert!(!args_counted_or_grown(
            r#"{"q":"weather"}"#,
            r#"{"q":"forecast"}"#
        ));
        assert!(!args_counted_or_grown(
            r#"{"a":1,"b":1}"#,
            r#"{"a":2,"b":2}"#
        ));
    }

    #[test]
    fn argument_strings_are_what_a_result_may_echo() {
        assert_eq!(
            arg_strings(r#"{"query":"weather today","page":2}"#),
            vec!["weather today".to_owned()]
        );
        assert!(
            arg_strings(r#"{"page":1}"#).is_empty(),
            "numbers are not echo strings"
        );
    }

    #[test]
    fn nested_argument_strings_are_found_longest_first() {
        let s = arg_strings(r#"{"a":{"b":["xy","long one"]},"c":"z"}"#);
        assert_eq!(s, vec!["long one".to_owned(), "xy".to_owned()]);
        assert!(arg_strings("not json").is_empty());
    }
}
