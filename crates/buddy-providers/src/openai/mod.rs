//! The OpenAI Chat Completions provider, for OpenAI and every compatible server
//! (vLLM, llama.cpp, Ollama, Groq, OpenRouter, Mistral, DeepSeek, LM Studio…).

mod request;
mod response;
mod stream;

use std::collections::BTreeMap;

use buddy_core::{BoxFuture, CompletionRequest, Provider, ProviderError, TokenStream};
use serde::{Deserialize, Serialize};

use crate::http::{Endpoint, HttpSettings, build_client};

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
}

impl OpenAiProvider {
    /// A provider for `options`.
    pub fn new(options: OpenAiOptions) -> Result<Self, ProviderError> {
        let client = build_client(&options.name, &options.http)?;
        let mut headers = options.headers;
        if let Some(key) = options.api_key.filter(|k| !k.trim().is_empty()) {
            headers.insert("authorization".to_owned(), format!("Bearer {}", key.trim()));
        }
        Ok(OpenAiProvider {
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
            compat: options.compat,
        })
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.endpoint.provider
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
            let body =
                request::chat_request(&request, self.stream, &self.compat, self.max_output_tokens);
            let endpoint = &self.endpoint;
            endpoint
                .call(
                    &body,
                    self.stream,
                    request.traceparent,
                    || OpenAiStreamParser::new(&endpoint.provider, &endpoint.url),
                    response::parse_response,
                )
                .await
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
