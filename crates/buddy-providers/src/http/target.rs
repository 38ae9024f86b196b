//! What an [`Endpoint`] is: the provider's URL, client, headers and bounds, built once and
//! checked, and the errors that name them. How it sends is `endpoint.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use buddy_core::ProviderError;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::{HttpSettings, secs};
use crate::watchdog::Keeper;

/// Where a provider sends its requests, and how; shared, so each call's body reader holds
/// it without copying it.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    parts: std::sync::Arc<EndpointParts>,
}

impl std::ops::Deref for Endpoint {
    type Target = EndpointParts;
    fn deref(&self) -> &EndpointParts {
        &self.parts
    }
}

/// What an [`Endpoint`] holds.
#[derive(Debug)]
pub(crate) struct EndpointParts {
    pub provider: String,
    pub url: String,
    pub client: reqwest::Client,
    pub settings: HttpSettings,
    /// `url`, parsed once rather than on every call.
    pub(super) parsed_url: reqwest::Url,
    /// The headers every request carries (content type, key, configured extras), checked
    /// once; a key is marked sensitive so no debug output shows it.
    pub(super) headers: HeaderMap,
    /// Keeps arming a call's watchdog from waking a parked thread.
    pub(super) keeper: Keeper,
}

impl Endpoint {
    /// An endpoint for `url` with `headers`; a URL or header that cannot be sent is a
    /// configuration error now, not a failure of every call later.
    pub(crate) fn new(
        provider: String,
        given_url: String,
        client: reqwest::Client,
        headers: BTreeMap<String, String>,
        settings: HttpSettings,
    ) -> Result<Self, ProviderError> {
        let config = |message: String| ProviderError::Config {
            provider: provider.clone(),
            message,
        };
        // Requests go to the URL as given; everything shown (errors, logs, spans) gets
        // it without credentials.
        let url = crate::redact_url(&given_url);
        let parsed_url = reqwest::Url::parse(&given_url).map_err(|e| {
            config(format!(
                "`{url}` is not a URL buddy can call ({e}); check base_url"
            ))
        })?;
        let mut map = HeaderMap::new();
        map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in &headers {
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                config(format!(
                    "header name `{name}` is not valid; header names are letters, digits and -"
                ))
            })?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                config(format!(
                    "the value of header `{name}` is not valid; values are printable text on one line"
                ))
            })?;
            if matches!(header.as_str(), "authorization" | "x-api-key" | "api-key") {
                value.set_sensitive(true);
            }
            map.insert(header, value);
        }
        Ok(Endpoint {
            parts: std::sync::Arc::new(EndpointParts {
                provider,
                url,
                client,
                keeper: Keeper::new(
                    secs(settings.first_byte_timeout_secs),
                    secs(settings.idle_timeout_secs),
                    secs(settings.call_timeout_secs),
                ),
                settings,
                parsed_url,
                headers: map,
            }),
        })
    }

    pub(super) fn timeout(&self, phase: &str, after: Duration) -> ProviderError {
        ProviderError::Timeout {
            provider: self.provider.clone(),
            url: self.url.clone(),
            phase: phase.to_owned(),
            after,
        }
    }

    /// A reply that hit one of the call's bounds.
    pub(super) fn bound(
        &self,
        what: &str,
        setting: &str,
        value: impl std::fmt::Display,
    ) -> ProviderError {
        ProviderError::Stream {
            provider: self.provider.clone(),
            url: self.url.clone(),
            message: format!(
                "{what} ({setting} = {value}); the call was ended. Raise [providers.{}.http] {setting} if the server is right",
                self.provider
            ),
            retryable: false,
        }
    }

    pub(super) fn stream_error(&self, message: String) -> ProviderError {
        ProviderError::Stream {
            provider: self.provider.clone(),
            url: self.url.clone(),
            message,
            retryable: false,
        }
    }
}
