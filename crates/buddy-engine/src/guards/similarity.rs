//! How alike two texts are, after normalising case, whitespace and digits (so counters
//! do not make texts differ). Short texts (arguments) compare by character trigrams;
//! long texts (results, answers) by word pairs, because the character trigrams of any
//! two long texts in one language overlap heavily even when they say different things.

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

/// True when two argument strings differ only by a counter, by growing, or by a small shift.
pub fn args_near(a_canonical: &str, b_canonical: &str) -> bool {
    if a_canonical == b_canonical {
        return false;
    }
    let (na, nb) = (normalize(a_canonical), normalize(b_canonical));
    if na == nb {
        return true;
    }
    let (ga, gb) = (
        na.trim_end_matches(['}', '"']),
        nb.trim_end_matches(['}', '"']),
    );
    // One value grew (or shrank) around the same prefix; `{` alone says nothing.
    let grows = ga.len().min(gb.len()) >= 6 && (gb.contains(ga) || ga.contains(gb));
    grows || similarity(&na, &nb) >= NEAR_ARGS
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

/// True when two tool results say essentially the same thing.
pub fn results_near(a: &str, b: &str) -> bool {
    a == b || text_similarity(&normalize(a), &normalize(b)) >= NEAR_RESULTS
}

/// Argument similarity above which two calls are near-duplicates ("rust" vs "rust async").
const NEAR_ARGS: f64 = 0.6;
/// Result similarity (word pairs) above which a near-duplicate call brought nothing new.
const NEAR_RESULTS: f64 = 0.8;
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
    fn counters_growth_and_shifts_are_near() {
        assert!(args_near(r#"{"page":1}"#, r#"{"page":2}"#));
        assert!(args_near(r#"{"q":"rust"}"#, r#"{"q":"rust async"}"#));
        assert!(args_near(
            r#"{"q":"weather in paris today"}"#,
            r#"{"q":"weather in paris now"}"#
        ));
        assert!(!args_near(
            r#"{"path":"src/main.rs"}"#,
            r#"{"path":"Cargo.toml"}"#
        ));
        assert!(!args_near(r#"{"page":1}"#, r#"{"page":1}"#));
    }

    #[test]
    fn pages_drawn_from_one_vocabulary_are_not_alike() {
        let words = [
            "audit", "budget", "revenue", "cohort", "margin", "quota", "ledger", "funnel",
        ];
        let page = |seed: usize| -> String {
            (0..400)
                .map(|i| words[(i * 7 + seed * 13 + i / 3 * seed) % words.len()])
                .collect::<Vec<_>>()
                .join(" ")
        };
        let (a, b) = (page(1), page(2));
        assert!(
            !results_near(&a, &b),
            "different pages are not the same result"
        );
        assert!(results_near(&a, &format!("{a} ")));
    }

    #[test]
    fn results_near_ignores_counters_but_not_content() {
        assert!(results_near(
            "No results for attempt 3",
            "No results for attempt 4"
        ));
        assert!(!results_near(
            "Chapter 1: the ship left port at dawn.",
            "Chapter 2: a storm broke the mast at noon."
        ));
    }
}
