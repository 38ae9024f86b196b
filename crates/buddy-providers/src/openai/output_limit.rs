//! Which field carries the output limit. OpenAI renamed `max_tokens` to
//! `max_completion_tokens`; its reasoning models (o-series) and gpt-5 refuse the old name
//! with a 400, while many compatible servers (older vLLM, llama.cpp, Ollama, LM Studio…)
//! read only the old one.

use buddy_core::ProviderError;
use serde::{Deserialize, Serialize};

/// The request field that carries the output limit (`[providers.NAME.compat]
/// output_limit_field`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputLimitField {
    /// `max_tokens`: what OpenAI-compatible servers read.
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI and Azure OpenAI take for every current model.
    MaxCompletionTokens,
}

/// Hosts that are OpenAI's own API or Azure OpenAI, which take `max_completion_tokens`.
const COMPLETION_TOKENS_HOSTS: [&str; 3] = [
    "api.openai.com",
    ".openai.azure.com",
    ".cognitiveservices.azure.com",
];

impl OutputLimitField {
    /// The field's name in the request body.
    pub fn as_str(self) -> &'static str {
        match self {
            OutputLimitField::MaxTokens => "max_tokens",
            OutputLimitField::MaxCompletionTokens => "max_completion_tokens",
        }
    }

    /// The other field.
    pub fn other(self) -> Self {
        match self {
            OutputLimitField::MaxTokens => OutputLimitField::MaxCompletionTokens,
            OutputLimitField::MaxCompletionTokens => OutputLimitField::MaxTokens,
        }
    }

    /// The field to send to `base_url`: the configured one, else `max_completion_tokens`
    /// for api.openai.com and Azure OpenAI and `max_tokens` for every other server.
    pub fn resolve(configured: Option<Self>, base_url: &str) -> Self {
        configured.unwrap_or_else(|| {
            if openai_hosted(base_url) {
                OutputLimitField::MaxCompletionTokens
            } else {
                OutputLimitField::MaxTokens
            }
        })
    }
}

/// True when `base_url` is OpenAI's own API or Azure OpenAI.
pub(crate) fn openai_hosted(base_url: &str) -> bool {
    let host = reqwest::Url::parse(base_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
        .unwrap_or_default();
    COMPLETION_TOKENS_HOSTS
        .iter()
        .any(|h| match h.strip_prefix('.') {
            Some(domain) => host.ends_with(h) || host == domain,
            None => host == *h,
        })
}

impl OutputLimitField {
    /// True when `error` is a server refusing this field (a 400 or 422 naming it): the
    /// other field may be taken.
    pub fn is_refused_by(self, error: &ProviderError) -> bool {
        match error {
            ProviderError::Http {
                status, message, ..
            } => self.refused_in(*status, message),
            _ => false,
        }
    }

    fn refused_in(self, status: u16, message: &str) -> bool {
        let lower = message.to_ascii_lowercase();
        matches!(status, 400 | 422)
            && lower.contains(self.as_str())
            && (lower.contains(self.other().as_str())
                || REFUSAL_WORDS.iter().any(|w| lower.contains(w)))
    }
}

/// Words with which servers refuse a field they do not take (OpenAI: "Unsupported
/// parameter: 'max_tokens' is not supported with this model"; Azure OpenAI before
/// 2024-09: "Unrecognized request argument supplied: max_completion_tokens"; vLLM and
/// other pydantic servers: "Extra inputs are not permitted").
const REFUSAL_WORDS: [&str; 7] = [
    "unsupported",
    "not supported",
    "unrecognized",
    "unknown",
    "extra inputs",
    "not permitted",
    "not allowed",
];

/// `error` with what to do added, when it is a server refusing the output limit's field
/// `sent` (on provider `provider`); any other error comes back as it was.
pub(crate) fn explain_refusal(
    error: ProviderError,
    sent: OutputLimitField,
    provider: &str,
) -> ProviderError {
    let ProviderError::Http {
        provider: name,
        url,
        status: status @ (400 | 422),
        message,
        retry_after,
    } = error
    else {
        return error;
    };
    let message = if sent.refused_in(status, &message) {
        format!(
            "{message}; this server does not take the output limit as `{sent}`: set \
             `output_limit_field = \"{other}\"` under [providers.{provider}.compat] (or pass \
             --output-limit-field {other}; `buddy doctor` checks it)",
            sent = sent.as_str(),
            other = sent.other().as_str(),
        )
    } else {
        message
    };
    ProviderError::Http {
        provider: name,
        url,
        status,
        message,
        retry_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_and_azure_openai_get_max_completion_tokens_and_others_max_tokens() {
        for url in [
            "https://api.openai.com/v1",
            "https://API.OpenAI.com/v1/",
            "https://myres.openai.azure.com/openai/v1",
            "https://myres.cognitiveservices.azure.com/openai/deployments/gpt-5",
        ] {
            assert_eq!(
                OutputLimitField::resolve(None, url),
                OutputLimitField::MaxCompletionTokens,
                "{url}"
            );
        }
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434/v1",
            "https://openrouter.ai/api/v1",
            "https://api.groq.com/openai/v1",
            "https://api.together.xyz/v1",
            "https://api.openai.com.example.net/v1",
            "https://notopenai.azure.com/v1",
            "not a url",
        ] {
            assert_eq!(
                OutputLimitField::resolve(None, url),
                OutputLimitField::MaxTokens,
                "{url}"
            );
        }
        assert_eq!(
            OutputLimitField::resolve(
                Some(OutputLimitField::MaxTokens),
                "https://api.openai.com/v1"
            ),
            OutputLimitField::MaxTokens
        );
    }
}
