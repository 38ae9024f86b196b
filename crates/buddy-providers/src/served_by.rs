//! Which provider a base URL reaches, as the OpenTelemetry GenAI conventions (1.41.0) name
//! it in `gen_ai.provider.name`.

use crate::ProviderKind;

/// Hosted OpenAI-compatible APIs the conventions name, by host (`.x` matches `x` and every
/// host under it).
const OPENAI_COMPATIBLE: [(&str, &str); 14] = [
    ("api.openai.com", "openai"),
    (".openai.azure.com", "azure.ai.openai"),
    (".cognitiveservices.azure.com", "azure.ai.openai"),
    (".services.ai.azure.com", "azure.ai.inference"),
    (".models.ai.azure.com", "azure.ai.inference"),
    ("models.inference.ai.azure.com", "azure.ai.inference"),
    ("api.groq.com", "groq"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.deepseek.com", "deepseek"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    (".aiplatform.googleapis.com", "gcp.vertex_ai"),
    (".cohere.com", "cohere"),
];

/// `gen_ai.provider.name` for a provider of `kind` at `base_url`. An OpenAI-compatible
/// server the conventions have no name for (vLLM, llama.cpp, Ollama, LM Studio,
/// OpenRouter, Together…) is `openai`, the API it speaks, as the conventions advise for
/// servers reached through the OpenAI API; its `server.address` tells it apart.
pub fn genai_provider_name(kind: ProviderKind, base_url: &str) -> &'static str {
    match kind {
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Scripted => "buddy.scripted",
        ProviderKind::Openai => {
            let host = reqwest::Url::parse(base_url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
                .unwrap_or_default();
            if host.starts_with("bedrock-runtime.") && host.ends_with(".amazonaws.com") {
                return "aws.bedrock";
            }
            OPENAI_COMPATIBLE
                .iter()
                .find(|(pattern, _)| match pattern.strip_prefix('.') {
                    Some(domain) => host == domain || host.ends_with(pattern),
                    None => host == *pattern,
                })
                .map_or("openai", |(_, name)| name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_base_url_gets_the_conventions_name_of_its_provider() {
        for (url, name) in [
            ("https://api.openai.com/v1", "openai"),
            ("https://res.openai.azure.com/openai/v1", "azure.ai.openai"),
            (
                "https://res.services.ai.azure.com/models",
                "azure.ai.inference",
            ),
            ("https://api.groq.com/openai/v1", "groq"),
            ("https://api.mistral.ai/v1", "mistral_ai"),
            ("https://api.deepseek.com", "deepseek"),
            ("https://api.x.ai/v1", "x_ai"),
            (
                "https://generativelanguage.googleapis.com/v1beta/openai",
                "gcp.gemini",
            ),
            (
                "https://bedrock-runtime.us-west-2.amazonaws.com/openai/v1",
                "aws.bedrock",
            ),
            ("https://openrouter.ai/api/v1", "openai"),
            ("http://127.0.0.1:8080/v1", "openai"),
            ("http://localhost:11434/v1", "openai"),
        ] {
            assert_eq!(
                genai_provider_name(ProviderKind::Openai, url),
                name,
                "{url}"
            );
        }
        assert_eq!(
            genai_provider_name(ProviderKind::Anthropic, "https://api.anthropic.com"),
            "anthropic"
        );
    }
}
