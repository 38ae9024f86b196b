//! Built-in context windows of common models; `context_window` in the policy overrides.

use crate::glob::{glob_match, without_org};

/// (model-name pattern, context window in tokens), most specific first. Sources: each
/// vendor's model documentation.
const WINDOWS: &[(&str, u64)] = &[
    ("gpt-4.1*", 1_047_576),
    ("gpt-5*", 400_000),
    ("gpt-4o*", 128_000),
    ("chatgpt-4o*", 128_000),
    ("gpt-4-turbo*", 128_000),
    ("gpt-4-32k*", 32_768),
    ("gpt-4*", 8_192),
    ("gpt-3.5-turbo*", 16_385),
    ("o1*", 200_000),
    ("o3*", 200_000),
    ("o4*", 200_000),
    ("claude-*", 200_000),
    ("gemini-*", 1_048_576),
    ("deepseek*", 64_000),
    ("mistral-large*", 128_000),
    ("mistral*", 32_000),
    ("qwen*", 32_768),
    ("llama-3.1*", 128_000),
    ("llama-3.2*", 128_000),
    ("llama3*", 8_192),
    ("smollm2*", 8_192),
];

/// Window assumed for a model buddy does not know: set `context_window` for it.
pub const UNKNOWN_MODEL_WINDOW: u64 = 32_768;

/// The built-in window for `model`.
pub fn default_window(model: &str) -> u64 {
    let lower = model.to_ascii_lowercase();
    // Ollama-style tags (`qwen2.5:7b`) and org prefixes (`openai/gpt-4o`) name the same models.
    let base = without_org(&lower);
    WINDOWS
        .iter()
        .find(|(pattern, _)| glob_match(pattern, base))
        .map_or(UNKNOWN_MODEL_WINDOW, |(_, window)| *window)
}

/// Tokens kept free for the reply when the policy does not say: a quarter of the
/// window, at most 4,096.
pub fn default_reserve(window: u64) -> u64 {
    (window / 4).min(4_096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_models_have_their_windows() {
        assert_eq!(default_window("gpt-4o-mini"), 128_000);
        assert_eq!(default_window("gpt-4"), 8_192);
        assert_eq!(default_window("gpt-4-turbo-2024-04-09"), 128_000);
        assert_eq!(default_window("claude-sonnet-4-5"), 200_000);
        assert_eq!(default_window("openai/gpt-4o"), 128_000);
        assert_eq!(default_window("qwen2.5:7b"), 32_768);
        assert_eq!(default_window("something-new"), UNKNOWN_MODEL_WINDOW);
        assert_eq!(default_reserve(8_192), 2_048);
        assert_eq!(default_reserve(200_000), 4_096);
    }
}
