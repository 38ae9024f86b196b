//! A tiny glob matcher (`*` any run, `?` one char) for model-name patterns.

/// True when `name` matches `pattern`.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A lower-cased model name without its org prefix, as the built-in tables know it:
/// `openai/gpt-4o` names `gpt-4o` (Ollama-style tags such as `qwen2.5:7b` stay).
pub(crate) fn without_org(lower: &str) -> &str {
    lower.rsplit('/').next().unwrap_or(lower)
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn matches_like_a_shell_glob() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("gpt-4o*", "gpt-4o-mini"));
        assert!(glob_match("gpt-4o*", "gpt-4o"));
        assert!(!glob_match("gpt-4o*", "gpt-4"));
        assert!(glob_match("*coder*", "qwen2.5-coder-7b"));
        assert!(glob_match("llama-?b", "llama-8b"));
        assert!(!glob_match("llama-?b", "llama-70b"));
        assert!(glob_match("claude-*-sonnet-*", "claude-3-5-sonnet-latest"));
    }
}
