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
/// exactly one value differs, and only by a counter (`page 1` -> `page 2`) or by growing
/// or shrinking around the same text (a query rewritten word by word). Two calls that
/// differ in two values (a file's name and its content) are two different actions.
pub fn args_near(a_canonical: &str, b_canonical: &str) -> bool {
    if a_canonical == b_canonical {
        return false;
    }
    let parsed = (
        serde_json::from_str::<serde_json::Value>(a_canonical),
        serde_json::from_str::<serde_json::Value>(b_canonical),
    );
    match parsed {
        (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) => {
            if a.len() != b.len() || a.keys().any(|k| !b.contains_key(k)) {
                return false;
            }
            let mut differing = a.iter().filter(|(k, v)| b.get(*k) != Some(*v));
            match (differing.next(), differing.next()) {
                (Some((key, value)), None) => b
                    .get(key)
                    .is_some_and(|other| value_near(&value.to_string(), &other.to_string())),
                _ => false,
            }
        }
        _ => value_near(a_canonical, b_canonical),
    }
}

/// True when two values (as JSON text) differ only by digits, or one grew from the other.
fn value_near(a: &str, b: &str) -> bool {
    let (na, nb) = (normalize(a), normalize(b));
    if na == nb {
        return true;
    }
    let (ga, gb) = (na.trim_matches('"'), nb.trim_matches('"'));
    // One value grew (or shrank) around the same text; a short one says nothing.
    ga.len().min(gb.len()) >= 6 && (gb.contains(ga) || ga.contains(gb))
}

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
    fn one_value_counting_up_or_growing_is_near() {
        assert!(args_near(r#"{"page":1}"#, r#"{"page":2}"#));
        assert!(args_near(
            r#"{"q":"libfoo changelog"}"#,
            r#"{"q":"libfoo changelog 0.4"}"#
        ));
        assert!(args_near(
            r#"{"n":10,"q":"attempt 1"}"#,
            r#"{"n":10,"q":"attempt 2"}"#
        ));
        assert!(args_near("attempt 1", "attempt 2"));
        assert!(!args_near(
            r#"{"path":"src/main.rs"}"#,
            r#"{"path":"Cargo.toml"}"#
        ));
        assert!(!args_near(r#"{"page":1}"#, r#"{"page":1}"#));
        // Rewording is a new question, and two values changed are a new action.
        assert!(!args_near(
            r#"{"q":"weather in paris today"}"#,
            r#"{"q":"weather in paris now"}"#
        ));
        assert!(!args_near(
            r#"{"content":"part 1","path":"part1.txt"}"#,
            r#"{"content":"part 2","path":"part2.txt"}"#
        ));
        assert!(!args_near(r#"{"page":1}"#, r#"{"page":2,"size":5}"#));
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
