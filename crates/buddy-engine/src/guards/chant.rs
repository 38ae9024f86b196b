//! Output that chants: a reply that repeats the same chunk of text over and over (small
//! models do this until their output limit). Detected while the reply streams, so it
//! can be cut as soon as the repetition is certain.

/// Longest chunk (in bytes) looked for; chants seen in practice repeat a sentence or two.
const MAX_PERIOD: usize = 2048;
/// The reply is checked again after this many new bytes (keeps the cost per byte small).
const CHECK_EVERY: usize = 256;
/// Earlier occurrences of the tail examined per check.
const MAX_CANDIDATES: usize = 8;

/// Watches a reply's text and says when its end is one chunk of at least `min_chars`
/// bytes repeated `repeats` times in a row.
#[derive(Debug)]
pub struct ChantDetector {
    min_chars: usize,
    repeats: usize,
    checked_at: usize,
}

impl ChantDetector {
    /// A detector for chunks of at least `min_chars` bytes seen `repeats` times in a row.
    pub fn new(min_chars: usize, repeats: usize) -> Self {
        ChantDetector {
            min_chars: min_chars.max(1),
            repeats: repeats.max(2),
            checked_at: 0,
        }
    }

    /// Looks at the whole reply so far; when it chants, returns how many bytes of it to
    /// keep (everything before the repetition plus one copy of the chunk).
    pub fn check(&mut self, text: &str) -> Option<usize> {
        let len = text.len();
        if len < self.checked_at + CHECK_EVERY || len < self.min_chars * self.repeats {
            return None;
        }
        self.checked_at = len;
        let bytes = text.as_bytes();
        let mut window_start = len - self.min_chars;
        while !text.is_char_boundary(window_start) {
            window_start -= 1;
        }
        let needle = &text[window_start..];
        let floor = len.saturating_sub(MAX_PERIOD * self.repeats);
        let mut floor_at = floor;
        while !text.is_char_boundary(floor_at) {
            floor_at += 1;
        }
        let mut search_end = window_start + needle.len() - 1;
        while !text.is_char_boundary(search_end) {
            search_end -= 1;
        }
        for _ in 0..MAX_CANDIDATES {
            if search_end <= floor_at {
                return None;
            }
            let found = text[floor_at..search_end].rfind(needle)? + floor_at;
            let distance = window_start - found;
            search_end = found + needle.len() - 1;
            while !text.is_char_boundary(search_end) {
                search_end -= 1;
            }
            if distance == 0 {
                continue;
            }
            let period = distance * self.min_chars.div_ceil(distance);
            if period > MAX_PERIOD || period * self.repeats > len {
                continue;
            }
            let start = len - period * self.repeats;
            if bytes[start..len - period] == bytes[start + period..len] {
                // Where the repetition began: keep what came before it and one copy.
                let mut begin = start;
                while begin > 0 && bytes[begin - 1] == bytes[begin - 1 + period] {
                    begin -= 1;
                }
                let mut keep = begin + period;
                while !text.is_char_boundary(keep) {
                    keep -= 1;
                }
                return Some(keep);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(detector: &mut ChantDetector, text: &str, step: usize) -> Option<(usize, usize)> {
        let mut end = 0;
        while end < text.len() {
            end = (end + step).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            if let Some(keep) = detector.check(&text[..end]) {
                return Some((end, keep));
            }
        }
        None
    }

    #[test]
    fn a_repeated_sentence_is_cut_after_ten_copies() {
        let intro = "Here is my answer. ";
        let line = "I am a helpful assistant and I will help you today. ";
        let text = format!("{intro}{}", line.repeat(40));
        let mut d = ChantDetector::new(50, 10);
        let (seen, keep) = feed(&mut d, &text, 7).expect("chant detected");
        let certain = intro.len() + line.len() * 10;
        assert!(
            seen <= certain + CHECK_EVERY + 7,
            "cut soon after the tenth copy: at {seen}"
        );
        assert!(text[..keep].starts_with(intro));
        let one_copy = intro.len() + line.len();
        assert!(
            (one_copy - 2..=one_copy).contains(&keep),
            "keeps the text before the chant and one copy: {keep}"
        );
    }

    #[test]
    fn legitimate_text_is_never_cut() {
        let table: String = (1..=200)
            .map(|i| format!("| row {i:>3} | value {:>6} | ok |\n", i * 37))
            .collect();
        let mut d = ChantDetector::new(50, 10);
        assert_eq!(
            feed(&mut d, &table, 13),
            None,
            "rows that differ in numbers"
        );
        let prose = "The quick brown fox jumps over the lazy dog. ".repeat(9);
        let mut d = ChantDetector::new(50, 10);
        assert_eq!(feed(&mut d, &prose, 5), None, "nine copies are not ten");
    }

    #[test]
    fn short_periods_and_multibyte_text_are_handled() {
        let mut d = ChantDetector::new(50, 10);
        assert!(feed(&mut d, &"ha".repeat(600), 11).is_some());
        let mut d = ChantDetector::new(50, 10);
        let text = "Ünïcödé wörds — répétées sans fin, encore et encore. ".repeat(20);
        let (_, keep) = feed(&mut d, &text, 3).expect("chant detected");
        assert!(text.is_char_boundary(keep));
    }
}
