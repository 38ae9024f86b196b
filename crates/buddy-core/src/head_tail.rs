//! Keeping the start and the end of a text too long for its place: a log or a test run
//! puts its verdict last, a file its start first. Used wherever buddy cuts a tool result.

/// The first half of `keep` bytes of `text` and its last bytes up to `keep` in all, each
/// on a char boundary (never overlapping): what stays of `text` when its middle is cut.
pub fn head_and_tail(text: &str, keep: usize) -> (&str, &str) {
    let mut head = (keep / 2).min(text.len());
    while head > 0 && !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - (keep - head).min(text.len() - head);
    while tail < text.len() && !text.is_char_boundary(tail) {
        tail += 1;
    }
    (&text[..head], &text[tail..])
}

#[cfg(test)]
mod tests {
    use super::head_and_tail;

    #[test]
    fn keeps_both_ends_on_char_boundaries() {
        assert_eq!(head_and_tail("héllo wörld", 4), ("h", "rld"));
        assert_eq!(head_and_tail("abcdefgh", 4), ("ab", "gh"));
        assert_eq!(head_and_tail("abc", 10), ("abc", ""));
        assert_eq!(head_and_tail("abcdef", 0), ("", ""));
    }
}
