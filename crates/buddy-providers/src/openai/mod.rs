//! The OpenAI Chat Completions provider, for OpenAI and every compatible server
//! (vLLM, llama.cpp, Ollama, Groq, OpenRouter, Mistral, DeepSeek, LM Studio…).

mod output_limit;
mod request;
mod response;
mod stream;

use std::collections::BTreeMap;

use buddy_core::{BoxFuture, CompletionRequest, Provider, ProviderError, TokenStream};
use serde::{Deserialize, Serialize};

use crate::http::{Endpoint, HttpSettings, Trace, build_client};

pub use output_limit::OutputLimitField;
pub use response::parse_response;
pub use stream::OpenAiStreamParser;

/// Switches for known deviations of compatible servers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpenAiCompat {
    /// Send `content: ""` instead of `null` on assistant messages that only call tools
    /// (some servers reject `null`).
    pub assistant_content_empty_string: bool,
    /// Leave out `stream_options` (servers that reject unknown fields).
    pub no_stream_options: bool,
    /// Send `tool_choice: "auto"` explicitly whenever tools are offered
    /// (llama-cpp-python's `chatml-function-calling` ignores tools without it).
    pub tool_choice_auto: bool,
    /// The model reads no images: a request with one is refused (400) instead of sent.
    pub no_images: bool,
    /// The model reads no files: a request with one is refused (400) instead of sent.
    pub no_files: bool,
    /// Send buddy's notes as user text instead of `system` messages (for servers whose
    /// chat template refuses a system message after the first).
    pub notes_as_user: bool,
    /// The field that carries the output limit; unset, `max_completion_tokens` goes to
    /// api.openai.com and Azure OpenAI and `max_tokens` to every other server.
    pub output_limit_field: Option<OutputLimitField>,
    /// Keep the tools in buddy's final-answer call and send `tool_choice: "none"`, so the
    /// call repeats the previous request as its prefix (a cache hit); unset, on for
    /// api.openai.com and Azure OpenAI, and off elsewhere (the tools are left out, which
    /// every server understands).
    pub tool_choice_none: Option<bool>,
    /// Send `prompt_cache_key` (one per conversation); unset, on for api.openai.com and
    /// Azure OpenAI, off elsewhere (a strict server refuses unknown fields).
    pub prompt_cache_key: Option<bool>,
    /// `prompt_cache_retention` to send (`in_memory`, `24h`), where the server takes it.
    pub prompt_cache_retention: Option<String>,
}

impl OpenAiCompat {
    /// The switches with their defaults for `base_url` filled in.
    fn resolved(mut self, base_url: &str) -> Self {
        let hosted = output_limit::openai_hosted(base_url);
        self.tool_choice_none = Some(self.tool_choice_none.unwrap_or(hosted));
        self.prompt_cache_key = Some(self.prompt_cache_key.unwrap_or(hosted));
        self
    }
}

/// Everything an [`OpenAiProvider`] needs. The `Default` is OpenAI's own API, streaming;
/// set what differs for your server and keep the rest.
///
/// ```
/// use buddy_providers::{OpenAiCompat, OpenAiOptions, OpenAiProvider};
///
/// let local = OpenAiProvider::new(OpenAiOptions {
///     name: "llama".into(),
///     base_url: "http://127.0.0.1:8080/v1".into(),
///     // llama-cpp-python ignores tools unless tool_choice is sent (`buddy doctor` tells).
///     compat: OpenAiCompat { tool_choice_auto: true, ..Default::default() },
///     ..Default::default()
/// })?;
/// let hosted = OpenAiProvider::new(OpenAiOptions {
///     api_key: std::env::var("OPENAI_API_KEY").ok(),
///     ..Default::default()
/// })?;
/// # let _ = (local, hosted);
/// # Ok::<(), buddy_core::ProviderError>(())
/// ```
#[derive(Clone, Debug)]
pub struct OpenAiOptions {
    /// Name used in errors and logs.
    pub name: String,
    /// E.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub http: HttpSettings,
    /// `false` for servers that cannot stream tool calls: plain requests, same events.
    pub stream: bool,
    pub max_output_tokens: Option<u32>,
    pub compat: OpenAiCompat,
}

impl Default for OpenAiOptions {
    /// OpenAI's own API with every default: set `api_key` (and `base_url` for another
    /// OpenAI-compatible server), keep the rest.
    fn default() -> Self {
        OpenAiOptions {
            name: "openai".to_owned(),
            base_url: crate::ProviderKind::Openai.default_base_url().to_owned(),
            api_key: None,
            headers: BTreeMap::new(),
            http: HttpSettings::default(),
            stream: true,
            max_output_tokens: None,
            compat: OpenAiCompat::default(),
        }
    }
}

/// A Chat Completions provider.
pub struct OpenAiProvider {
    endpoint: Endpoint,
    stream: bool,
    max_output_tokens: Option<u32>,
    compat: OpenAiCompat,
    /// The field the output limit goes in, for this server.
    limit_field: OutputLimitField,
    /// The base URL as configured, and its provider's name in traces.
    base_url: String,
    genai_name: &'static str,
}

impl OpenAiProvider {
    /// A provider for `options`.
    pub fn new(options: OpenAiOptions) -> Result<Self, ProviderError> {
        let client = build_client(&options.name, &options.http)?;
        let mut headers = options.headers;
        if let Some(key) = options.api_key.filter(|k| !k.trim().is_empty()) {
            headers.insert("authorization".to_owned(), format!("Bearer {}", key.trim()));
        }
        let limit_field =
            OutputLimitField::resolve(options.compat.output_limit_field, &options.base_url);
        let genai_name = crate::genai_provider_name(crate::ProviderKind::Openai, &options.base_url);
        Ok(OpenAiProvider {
            limit_field,
            genai_name,
            base_url: options.base_url.clone(),
            endpoint: Endpoint::new(
                options.name,
                format!(
                    "{}/chat/completions",
                    options.base_url.trim_end_matches('/')
                ),
                client,
                headers,
                options.http,
            )?,
            stream: options.stream,
            max_output_tokens: options.max_output_tokens,
            compat: options.compat.resolved(&options.base_url),
        })
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.endpoint.provider
    }

    fn served_by(&self) -> Option<buddy_core::ServedBy<'_>> {
        Some(buddy_core::ServedBy {
            provider_name: self.genai_name,
            base_url: &self.base_url,
        })
    }

    /// The Chat Completions API takes every setting buddy knows.
    fn unsupported(&self, _: &buddy_core::Sampling) -> Option<String> {
        None
    }

    /// Images and files go as content parts, unless `[providers.NAME.compat]` says the
    /// model reads none (`no_images`, `no_files`).
    fn refuses(&self, attachment: &buddy_core::Attachment) -> Option<String> {
        let (refused, kind, switch) = match attachment {
            buddy_core::Attachment::Image { .. } => (self.compat.no_images, "images", "no_images"),
            buddy_core::Attachment::File { .. } => (self.compat.no_files, "files", "no_files"),
        };
        refused.then(|| {
            format!(
                "provider `{}` does not take {kind} (its compat switch {switch} is set): send text only",
                self.endpoint.provider
            )
        })
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        Box::pin(async move {
            let body = request::chat_request(
                &request,
                self.stream,
                &self.compat,
                self.max_output_tokens,
                self.limit_field,
            );
            let endpoint = &self.endpoint;
            endpoint
                .call(
                    &body,
                    self.stream,
                    Trace::of(&request),
                    || OpenAiStreamParser::new(&endpoint.provider, &endpoint.url),
                    response::parse_response,
                )
                .await
                .map_err(|e| output_limit::explain_refusal(e, self.limit_field, &endpoint.provider))
        })
    }
}

#[cfg(test)]
mod attachment_tests {
    use buddy_core::{Attachment, Provider};

    use super::*;

    #[test]
    fn a_model_without_eyes_refuses_images_by_its_compat_switch() {
        let image = Attachment::Image {
            url: "https://example.com/cat.png".into(),
            detail: None,
        };
        let file = Attachment::File {
            filename: None,
            data: "data:application/pdf;base64,JVBERi0=".into(),
        };
        let seeing = OpenAiProvider::new(OpenAiOptions::default()).unwrap();
        assert_eq!(
            (seeing.refuses(&image), seeing.refuses(&file)),
            (None, None)
        );
        let blind = OpenAiProvider::new(OpenAiOptions {
            name: "llama".into(),
            compat: OpenAiCompat {
                no_images: true,
                ..OpenAiCompat::default()
            },
            ..OpenAiOptions::default()
        })
        .unwrap();
        let why = blind.refuses(&image).unwrap();
        assert!(
            why.contains("`llama`") && why.contains("no_images"),
            "{why}"
        );
        assert_eq!(blind.refuses(&file), None);
    }
}

#[cfg(test)]
mod output_limit_tests {
    use buddy_core::{CompletionRequest, Message};

    use super::*;

    /// OpenAI's own API (the default base URL) and Azure OpenAI get `max_completion_tokens`.
    #[test]
    fn openai_and_azure_get_the_output_limit_as_max_completion_tokens() {
        for base_url in [
            OpenAiOptions::default().base_url,
            "https://res.openai.azure.com/openai/v1".to_owned(),
        ] {
            let provider = OpenAiProvider::new(OpenAiOptions {
                base_url,
                max_output_tokens: Some(64),
                ..OpenAiOptions::default()
            })
            .unwrap();
            let history = [Message::user("hi")];
            let body = request::chat_request(
                &CompletionRequest::new("gpt-5", &history),
                true,
                &provider.compat,
                provider.max_output_tokens,
                provider.limit_field,
            );
            let json = serde_json::to_value(&body).unwrap();
            assert_eq!(json["max_completion_tokens"], 64);
            assert!(json.get("max_tokens").is_none(), "{json}");
        }
    }
}
