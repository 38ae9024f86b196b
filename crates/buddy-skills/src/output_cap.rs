//! Caps text handed to the model, saying clearly what was cut.

/// `text` cut to at most `max_bytes` (on a char boundary) with a note of what was
/// dropped and what to do, or `text` unchanged when it fits.
pub fn cap_text(text: String, max_bytes: usize, how_to_see_more: &str) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    let total = text.len();
    let mut out = text;
    out.truncate(end);
    out.push_str(&format!(
        "\n[truncated: showing the first {end} of {total} bytes. {how_to_see_more}]"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::cap_text;

    #[test]
    fn cuts_on_a_char_boundary_and_says_so() {
        assert_eq!(cap_text("short".into(), 10, "x"), "short");
        let out = cap_text("héllo world".into(), 2, "Ask for less.");
        assert!(
            out.starts_with("h\n[truncated: showing the first 1 of 12 bytes. Ask for less.]"),
            "{out}"
        );
    }
}
