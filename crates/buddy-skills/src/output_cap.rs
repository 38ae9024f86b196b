//! Caps text handed to the model, saying clearly what was cut. The head and the tail are
//! kept and the middle cut: a build log or a test run puts its verdict at the end, a file
//! its start at the top, and a marker in between says how much is missing and how to get it.

/// `text` cut to at most `max_bytes` of its own — its first half and its last half, on
/// char boundaries — with a marker where the middle was (how many bytes and which lines
/// were cut, and `how_to_see_more`), or `text` unchanged when it fits.
pub fn cap_text(text: String, max_bytes: usize, how_to_see_more: &str) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let total = text.len();
    let (kept_head, kept_tail) = buddy_core::head_and_tail(&text, max_bytes);
    let head = kept_head.len();
    let tail_start = total - kept_tail.len();
    let cut = tail_start - head;
    let first_line = text[..head].matches('\n').count() + 1;
    let last_line = first_line + text[head..tail_start].matches('\n').count();
    let lines = if first_line == last_line {
        format!("line {first_line}")
    } else {
        format!("lines {first_line}-{last_line}")
    };
    let marker = format!(
        "\n[truncated: {cut} of {total} bytes cut here ({lines}); the first {head} and the last {} \
         bytes are shown. {how_to_see_more}]\n",
        total - tail_start
    );
    let mut out = String::with_capacity(max_bytes + marker.len());
    out.push_str(&text[..head]);
    out.push_str(&marker);
    out.push_str(&text[tail_start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::cap_text;

    #[test]
    fn fitting_text_is_unchanged() {
        assert_eq!(cap_text("short".into(), 10, "x"), "short");
        assert_eq!(cap_text("exactly10!".into(), 10, "x"), "exactly10!");
    }

    #[test]
    fn keeps_the_head_and_the_tail_on_char_boundaries_and_says_what_was_cut() {
        let out = cap_text("héllo wörld".into(), 4, "Ask for less.");
        assert_eq!(
            out,
            "h\n[truncated: 9 of 13 bytes cut here (line 1); the first 1 and the last 3 bytes are shown. Ask for less.]\nrld"
        );
    }

    #[test]
    fn a_long_log_keeps_its_last_line() {
        let mut log = "compiling crate\n".repeat(12_500);
        log.push_str("error[E0425]: cannot find value `x` in this scope\n");
        let out = cap_text(log.clone(), 64 * 1024, "Ask for a smaller part.");
        assert!(out.len() < 64 * 1024 + 200, "{}", out.len());
        assert!(out.starts_with("compiling crate\n"));
        assert!(out.ends_with("error[E0425]: cannot find value `x` in this scope\n"));
        let cut = log.len() - 64 * 1024;
        assert!(
            out.contains(&format!(
                "[truncated: {cut} of {} bytes cut here (lines 2049-",
                log.len()
            )),
            "{}",
            &out[32 * 1024 - 10..32 * 1024 + 200]
        );
    }
}
