//! What a tool result carries that is not information: timestamps, dates, times of day,
//! durations, UUIDs and long hex ids, labelled request/trace ids, epoch times, and
//! counters of checks ("check 5", "attempt 3", "polled 4 times"). A result that changes
//! only in these has told the model nothing new.
//!
//! Everything else counts: numbers that are not one of the above (`page 2`, `{"n": 3}`,
//! a ticket `48213907`, `14°C`) are information, and two results that differ in them are
//! different results.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};

/// The noise patterns, most specific first; each match becomes a placeholder.
static NOISE: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // UUIDs.
        (
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
            "<id>",
        ),
        // Labelled ids: `request_id: abc123`, `trace-id=…`, `ETag: "…"`; codex's
        // exec_command output labels each call's output `Chunk ID: baa046`.
        (
            r#"(?i)\b(?:request|req|trace|span|correlation|session|run|chunk)[ _-]?id\b["']?\s*[:=]\s*["']?[\w.-]+|\betag\b\s*[:=]\s*"?[\w/.-]+"?"#,
            "<id>",
        ),
        // ISO 8601 and RFC 3339 date-times.
        (
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b",
            "<time>",
        ),
        // RFC 2822 date-times: `Mon, 01 Jan 2025 12:00:07 GMT`.
        (
            r"(?i)\b(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s+\d{1,2}\s+[a-z]{3,9}\s+\d{4}(?:\s+\d{2}:\d{2}(?::\d{2})?(?:\s*(?:gmt|utc|[+-]\d{4}))?)?",
            "<time>",
        ),
        // Dates.
        (r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b", "<date>"),
        // Times of day.
        (
            r"(?i)\b\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s?[ap]\.?m\.?)?(?:\s?(?:utc|gmt|z))?\b",
            "<time>",
        ),
        // Epoch seconds and milliseconds (2017 to 2033).
        (r"\b1[5-9]\d{8}(?:\d{3})?\b", "<time>"),
        // Durations.
        (
            r"(?i)\b\d+(?:[.,]\d+)?\s?(?:ns|µs|us|ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?)\b",
            "<duration>",
        ),
        // Counters of checks, tries and polls.
        (
            r"(?i)\b(?:checks?|checked|attempts?|tries|try|retry|retries|polls?|polled)\s*(?:#|no\.?|number)?\s*\d+\b|\b\d+(?:st|nd|rd|th)?\s*(?:checks|attempts|tries|retries|polls|times)\b",
            "<count>",
        ),
        // A shell's own line counter: bash names the line of its input stream in its
        // errors (`/bin/bash: line 345: javac: command not found`), and an agent's
        // long-lived shell (SWE-agent's) reads one more line with every command.
        (r"\b(?:ba|da|z)?sh: line \d+:", "<shell line>"),
        // Long hex ids and hashes: 16 or more hex digits with letters and digits mixed.
        (r"\b[0-9a-fA-F]{16,}\b", "<hex>"),
    ]
    .into_iter()
    .filter_map(|(pattern, placeholder)| Regex::new(pattern).ok().map(|r| (r, placeholder)))
    .collect()
});

/// All of [`NOISE`] in one automaton: one pass tells which patterns match at all (most
/// results hold none), instead of one search per pattern. A replacement can make a later
/// pattern match (a placeholder brings word boundaries), so the set is asked again after one.
static NOISE_SET: LazyLock<Option<RegexSet>> =
    LazyLock::new(|| RegexSet::new(NOISE.iter().map(|(pattern, _)| pattern.as_str())).ok());

/// `text` with its noise replaced by placeholders, and surrounding white space trimmed.
pub fn denoise(text: &str) -> String {
    denoise_owned(text.trim().to_owned())
}

/// True when no noise pattern matches `text` (then [`denoise`] leaves it as it is).
pub fn holds_no_noise(text: &str) -> bool {
    NOISE_SET.as_ref().is_some_and(|set| !set.is_match(text))
}

/// [`denoise`] of an already trimmed text it may rewrite in place.
fn denoise_owned(mut out: String) -> String {
    // Most results hold no noise: asking whether any pattern matches stops at the first
    // match, where asking which ones match reads the whole text.
    if holds_no_noise(&out) {
        return out;
    }
    let set = NOISE_SET.as_ref();
    let mut found = set.map(|set| set.matches(&out));
    for (i, (pattern, placeholder)) in NOISE.iter().enumerate() {
        if found.as_ref().is_some_and(|f| !f.matched(i)) {
            continue;
        }
        if pattern.is_match(&out) {
            out = pattern
                .replace_all(&out, |caps: &regex::Captures<'_>| {
                    replacement(caps, placeholder)
                })
                .into_owned();
            found = set.map(|set| set.matches(&out));
        }
    }
    out
}

/// What one match of a noise pattern becomes: its placeholder, except that a long run of
/// hex digits with no letter is a plain number (information), not an id.
fn replacement(caps: &regex::Captures<'_>, placeholder: &str) -> String {
    let found = caps.get(0).map_or("", |m| m.as_str());
    if placeholder == "<hex>" && !found.bytes().any(|b| b.is_ascii_alphabetic()) {
        found.to_owned()
    } else {
        placeholder.to_owned()
    }
}

/// The information of a tool result: the result less what it echoes of its call's own
/// argument strings, less its noise, as a 64-bit fingerprint. Two results with the same
/// fingerprint told the model the same thing.
pub fn fingerprint(result: &str, arg_strings: &[String]) -> u64 {
    let mut text = result.trim().to_owned();
    for s in arg_strings {
        if text.contains(s.as_str()) {
            text = text.replace(s.as_str(), "");
        }
    }
    let trimmed = text.trim();
    if trimmed.len() != text.len() {
        text = trimmed.to_owned();
    }
    hash(&denoise_owned(text))
}

/// A stable 64-bit hash (FNV-1a: the same in every run and build, so a replay judges
/// alike and a stored judge memory reads back).
pub fn hash(text: &str) -> u64 {
    fnv(FNV_START, text.as_bytes())
}

/// Where an FNV-1a hash starts.
pub const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// `hash` carried on over more bytes (FNV-1a), for text hashed as it is written.
pub fn fnv(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, b| fnv_byte(h, *b))
}

/// `hash` carried on over one byte (FNV-1a).
#[inline]
pub fn fnv_byte(hash: u64, byte: u8) -> u64 {
    (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_ids_durations_and_check_counters_are_noise() {
        let a = "pending (checked at 2025-01-01T12:00:07Z, check 2, request 3f2a9c1b-9d4e-4c1b-8a2f-0051c0ffee00)";
        let b = "pending (checked at 2025-01-01T12:01:13Z, check 7, request 3f2b55b5-9d4e-4c1b-8a2f-0051c1098496)";
        assert_eq!(denoise(a), denoise(b));
        assert_eq!(
            denoise(a),
            "pending (checked at <time>, <count>, request <id>)"
        );
        for (x, y) in [
            ("2 passed in 0.01s", "2 passed in 0.35s"),
            ("built at 12:00:07 UTC", "built at 12:04:59 UTC"),
            ("as of 2025-01-01", "as of 2025-01-02"),
            (
                "request_id: req_81af77; status ok",
                "request_id: req_99bc01; status ok",
            ),
            (
                "trace 9f86d081884c7d659a2feaa0c55ad015 done",
                "trace 4bf92f3577b34da6a3ce929d0e0e4736 done",
            ),
            (
                "still running (polled 4 times)",
                "still running (polled 5 times)",
            ),
            (
                "Chunk ID: baa046 Wall time: 0.0000 seconds Process exited with code 1",
                "Chunk ID: 538ace Wall time: 0.0012 seconds Process exited with code 1",
            ),
            ("updated 1735732807", "updated 1735732999"),
            (
                "Date: Mon, 01 Jan 2025 12:00:07 GMT",
                "Date: Mon, 01 Jan 2025 12:01:00 GMT",
            ),
        ] {
            assert_eq!(denoise(x), denoise(y), "{x} / {y}");
        }
    }

    #[test]
    fn numbers_that_are_information_stay() {
        for (x, y) in [
            ("content of page 1", "content of page 2"),
            (r#"{"n":0}"#, r#"{"n":1}"#),
            ("48213907", "90211734"),
            ("Paris: 14°C", "Paris: 15°C"),
            ("exported 48,213 rows", "exported 48,214 rows"),
            (
                "FAILED test_add: expected 3, got -1",
                "FAILED test_add: expected 3, got 4",
            ),
            ("12 of 12 checks passed", "11 of 12 checks passed"),
            ("version 2.7.1", "version 2.7.2"),
            ("chain/9-c7842419.txt", "chain/9-c7842420.txt"),
        ] {
            assert_ne!(denoise(x), denoise(y), "{x} / {y}");
        }
    }

    #[test]
    fn a_fingerprint_ignores_the_echo_of_the_call_and_its_noise() {
        let q1 = vec!["step 3 after 48213907".to_owned()];
        let q2 = vec!["step 5 after 90211734".to_owned()];
        assert_eq!(
            fingerprint("Results for 'step 3 after 48213907': 1 page found.", &q1),
            fingerprint("Results for 'step 5 after 90211734': 1 page found.", &q2)
        );
        assert_ne!(fingerprint("running", &[]), fingerprint("queued", &[]));
        assert_eq!(fingerprint(" running\n", &[]), fingerprint("running", &[]));
    }

    /// Every pattern tried in turn, as before the one-pass prefilter.
    fn denoise_each(text: &str) -> String {
        let mut out = text.trim().to_owned();
        for (pattern, placeholder) in NOISE.iter() {
            out = pattern
                .replace_all(&out, |caps: &regex::Captures<'_>| {
                    replacement(caps, placeholder)
                })
                .into_owned();
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn the_prefilter_changes_no_result(parts in proptest::collection::vec(proptest::sample::select(vec![
            "3f2a9c1b-9d4e-4c1b-8a2f-0051c0ffee00", "request_id: ab12", "2025-01-01T12:00:07Z",
            "Mon, 01 Jan 2025 12:00:07 GMT", "2025-01-01", "1/2/25", "12:00", "7 pm", "1700000000",
            "1700000000123", "35 ms", "2.5 s", "check 2", "3rd attempt", "polled 4 times",
            "deadbeefcafe12345678", "1234567890123456", "page 2", "14°C", "<id>", "<time>", " ",
            ", ", "ok", "h", "5", ":", "-", "etag: \"x1\"", "trace-id=9f",
        ]), 0..12)) {
            let text: String = parts.concat();
            proptest::prop_assert_eq!(denoise(&text), denoise_each(&text));
        }
    }
}
