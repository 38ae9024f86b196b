//! The Anthropic Messages provider.

pub mod breakpoints;
mod request;
mod response;
mod stream;

use std::collections::BTreeMap;

use buddy_core::{BoxFuture, CompletionRequest, Provider, ProviderError, TokenStream, Wire};

use crate::http::{Endpoint, HttpSettings, Trace, build_client};

pub use response::parse_response;
pub use stream::AnthropicStreamParser;

/// The `anthropic-version` header buddy speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by the API; this is used when none is configured.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Everything an [`AnthropicProvider`] needs.
#[derive(Clone, Debug)]
pub struct AnthropicOptions {
    /// Name used in errors and logs.
    pub name: String,
    /// E.g. `https://api.anthropic.com` (a trailing `/v1` is accepted).
    pub base_url: String,
    pub api_key: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub http: HttpSettings,
    pub stream: bool,
    pub max_output_tokens: Option<u32>,
    /// buddy's own prompt-cache breakpoints and their lifetime; `None` sends none (a
    /// client's own breakpoints still go).
    pub cache: Option<buddy_core::CacheTtl>,
}

/// A Messages API provider.
pub struct AnthropicProvider {
    endpoint: Endpoint,
    stream: bool,
    max_tokens: u32,
    cache: Option<buddy_core::CacheTtl>,
    /// The base URL as configured (for traces).
    base_url: String,
}

impl AnthropicProvider {
    /// A provider for `options`.
    pub fn new(options: AnthropicOptions) -> Result<Self, ProviderError> {
        let client = build_client(&options.name, &options.http)?;
        let mut headers = options.headers;
        headers.insert("anthropic-version".to_owned(), ANTHROPIC_VERSION.to_owned());
        if let Some(key) = options.api_key.filter(|k| !k.trim().is_empty()) {
            headers.insert("x-api-key".to_owned(), key.trim().to_owned());
        }
        let base = options.base_url.trim_end_matches('/');
        let url = if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        };
        Ok(AnthropicProvider {
            base_url: options.base_url.clone(),
            endpoint: Endpoint::new(options.name, url, client, headers, options.http)?,
            stream: options.stream,
            max_tokens: options.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            cache: options.cache,
        })
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        &self.endpoint.provider
    }

    fn served_by(&self) -> Option<buddy_core::ServedBy<'_>> {
        Some(buddy_core::ServedBy {
            provider_name: crate::genai_provider_name(
                crate::ProviderKind::Anthropic,
                &self.base_url,
            ),
            base_url: &self.base_url,
        })
    }

    fn unsupported(&self, sampling: &buddy_core::Sampling) -> Option<String> {
        request::unsupported(&self.endpoint.provider, sampling)
    }

    fn refuses(&self, attachment: &buddy_core::Attachment) -> Option<String> {
        request::refuses(&self.endpoint.provider, attachment)
    }

    /// A client's Messages request, sent as it came (guard mode's pass-through).
    fn forward_exact<'a>(
        &'a self,
        wire: Wire,
        body: Vec<u8>,
        stream: bool,
        headers: Vec<(String, String)>,
        request: CompletionRequest<'a>,
    ) -> Option<BoxFuture<'a, Result<TokenStream, ProviderError>>> {
        (wire == Wire::AnthropicMessages).then(|| {
            Box::pin(async move {
                let trace = Trace {
                    client_headers: &headers,
                    ..Trace::of(&request)
                };
                let endpoint = &self.endpoint;
                let parser = || AnthropicStreamParser::new(&endpoint.provider, &endpoint.url);
                endpoint
                    .call_exact(body.into(), stream, trace, parser, response::parse_response)
                    .await
            }) as BoxFuture<'a, _>
        })
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        Box::pin(async move {
            let body =
                request::messages_request(&request, self.stream, self.max_tokens, self.cache);
            let endpoint = &self.endpoint;
            endpoint
                .call(
                    &body,
                    self.stream,
                    Trace::of(&request),
                    || AnthropicStreamParser::new(&endpoint.provider, &endpoint.url),
                    response::parse_response,
                )
                .await
        })
    }
}
