//! Providers as declared in `buddy.toml` (`[providers.NAME]`), and building them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use buddy_core::{Provider, ProviderError};
use serde::{Deserialize, Serialize};

use crate::anthropic::{AnthropicOptions, AnthropicProvider};
use crate::http::HttpSettings;
use crate::openai::{OpenAiCompat, OpenAiOptions, OpenAiProvider};

/// Which wire protocol a provider speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// buddy's offline scripted model.
    #[default]
    Scripted,
    /// OpenAI Chat Completions and every compatible server.
    Openai,
    /// Anthropic Messages.
    Anthropic,
}

impl ProviderKind {
    /// The kind named `name` (`openai`, `anthropic`, `scripted`).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "openai" => Some(ProviderKind::Openai),
            "anthropic" => Some(ProviderKind::Anthropic),
            "scripted" => Some(ProviderKind::Scripted),
            _ => None,
        }
    }

    /// Its name in buddy.toml and on the command line (what [`ProviderKind::parse`] reads).
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Scripted => "scripted",
        }
    }

    /// Its name for people, as its maker writes it (`OpenAI`, `Anthropic`, `scripted`).
    pub fn display_name(self) -> &'static str {
        match self {
            ProviderKind::Openai => "OpenAI",
            ProviderKind::Anthropic => "Anthropic",
            ProviderKind::Scripted => "scripted",
        }
    }

    /// The public endpoint used when no `base_url` is given.
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::Openai => "https://api.openai.com/v1",
            ProviderKind::Anthropic => "https://api.anthropic.com",
            ProviderKind::Scripted => "",
        }
    }

    /// The environment variable holding the API key when `api_key_env` is not given.
    pub fn default_key_env(self) -> &'static str {
        match self {
            ProviderKind::Openai => "OPENAI_API_KEY",
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
            ProviderKind::Scripted => "",
        }
    }
}

fn yes() -> bool {
    true
}

/// One `[providers.NAME]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    #[serde(default)]
    pub base_url: Option<String>,
    /// The model to ask for (a `--model` flag overrides it).
    #[serde(default)]
    pub model: Option<String>,
    /// Other models clients of `buddy serve` may name for this provider.
    #[serde(default)]
    pub models: Vec<String>,
    /// Let `buddy serve` pass any model name a client sends to this provider.
    #[serde(default)]
    pub any_model: bool,
    /// Environment variable with the API key (default `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The key itself (prefer `api_key_env`: config files get shared).
    #[serde(default)]
    pub api_key: Option<String>,
    /// Extra HTTP headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `false` for servers that cannot stream tool calls.
    #[serde(default = "yes")]
    pub stream: bool,
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    /// Timeouts and retries (`[providers.NAME.http]`).
    #[serde(default)]
    pub http: HttpSettings,
    /// OpenAI-compatible servers' known deviations (`[providers.NAME.compat]`).
    #[serde(default)]
    pub compat: OpenAiCompat,
    /// For `kind = "scripted"`: the scenario to play.
    #[serde(default)]
    pub scenario: Option<PathBuf>,
    /// What its models cost, by model pattern (`"gpt-4o*" = { input = 2.5, output = 10 }`,
    /// dollars per million tokens); beats buddy's built-in list prices.
    #[serde(default)]
    pub prices: BTreeMap<String, buddy_core::Price>,
    /// Use the provider's prompt cache: Anthropic `cache_control` breakpoints, OpenAI's
    /// `prompt_cache_key` (`false` sends neither; a client's own breakpoints still go).
    #[serde(default = "yes")]
    pub prompt_cache: bool,
    /// How long Anthropic keeps what buddy's breakpoints write: `"5m"` (the default,
    /// writes billed 1.25× input) or `"1h"` (2×, for turns with long pauses).
    #[serde(default)]
    pub cache_ttl: buddy_core::CacheTtl,
    /// OpenAI's `prompt_cache_retention` (`"in_memory"`, `"24h"`), where the server takes it.
    #[serde(default)]
    pub prompt_cache_retention: Option<String>,
}

impl ProviderConfig {
    /// A provider of `kind` with every default.
    pub fn of_kind(kind: ProviderKind) -> Self {
        ProviderConfig {
            kind,
            base_url: None,
            model: None,
            models: Vec::new(),
            any_model: false,
            api_key_env: None,
            api_key: None,
            headers: BTreeMap::new(),
            stream: true,
            max_output_tokens: None,
            http: HttpSettings::default(),
            compat: OpenAiCompat::default(),
            scenario: None,
            prices: BTreeMap::new(),
            prompt_cache: true,
            cache_ttl: buddy_core::CacheTtl::default(),
            prompt_cache_retention: None,
        }
    }

    /// Builds an HTTP provider named `name`; `env` reads environment variables (so
    /// callers and tests choose the source). The scripted kind is built by its caller.
    pub fn build_http(
        &self,
        name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Arc<dyn Provider>, ProviderError> {
        let base_url = self
            .base_url
            .clone()
            .unwrap_or_else(|| self.kind.default_base_url().to_owned());
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(ProviderError::Config {
                provider: name.to_owned(),
                message: format!("base_url `{base_url}` must start with http:// or https://"),
            });
        }
        let var = self
            .api_key_env
            .as_deref()
            .unwrap_or(self.kind.default_key_env());
        let api_key = self.api_key.clone().or_else(|| env(var));
        // The hosted APIs refuse every call without a key: say so now, not after retries.
        // (A local server at its own base_url may need none; a key in `headers` counts.)
        let has_auth_header = self.headers.keys().any(|h| {
            h.eq_ignore_ascii_case("authorization") || h.eq_ignore_ascii_case("x-api-key")
        });
        if api_key.is_none() && !has_auth_header && base_url == self.kind.default_base_url() {
            return Err(ProviderError::Config {
                provider: name.to_owned(),
                message: format!(
                    "no API key for {base_url}: set {var} (or `api_key_env` under [providers.{name}]), or point base_url at a server that needs none"
                ),
            });
        }
        Ok(match self.kind {
            ProviderKind::Openai => Arc::new(OpenAiProvider::new(OpenAiOptions {
                name: name.to_owned(),
                base_url,
                api_key,
                headers: self.headers.clone(),
                http: self.http.clone(),
                stream: self.stream,
                max_output_tokens: self.max_output_tokens,
                compat: self.openai_compat(),
            })?),
            ProviderKind::Anthropic => Arc::new(AnthropicProvider::new(AnthropicOptions {
                name: name.to_owned(),
                base_url,
                api_key,
                headers: self.headers.clone(),
                http: self.http.clone(),
                stream: self.stream,
                max_output_tokens: self.max_output_tokens,
                cache: self.prompt_cache.then_some(self.cache_ttl),
            })?),
            ProviderKind::Scripted => {
                return Err(ProviderError::Config {
                    provider: name.to_owned(),
                    message: "the scripted model is not an HTTP provider".to_owned(),
                });
            }
        })
    }
}

impl ProviderConfig {
    /// The compat switches with the cache settings folded in.
    fn openai_compat(&self) -> OpenAiCompat {
        let mut compat = self.compat.clone();
        if !self.prompt_cache {
            compat.prompt_cache_key = Some(false);
        }
        if self.prompt_cache_retention.is_some() {
            compat.prompt_cache_retention = self.prompt_cache_retention.clone();
        }
        compat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosted_api_without_a_key_is_refused_before_any_call() {
        let none = |_: &str| None;
        for kind in [ProviderKind::Openai, ProviderKind::Anthropic] {
            let error = ProviderConfig::of_kind(kind)
                .build_http("p", &none)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                error.contains("no API key") && error.contains("_API_KEY"),
                "{error}"
            );
        }
        // A key from the environment, a local server, or a key in the headers will do.
        let key = |_: &str| Some("sk-test".to_owned());
        assert!(
            ProviderConfig::of_kind(ProviderKind::Openai)
                .build_http("p", &key)
                .is_ok()
        );
        let mut local = ProviderConfig::of_kind(ProviderKind::Openai);
        local.base_url = Some("http://127.0.0.1:8080/v1".into());
        assert!(local.build_http("p", &none).is_ok());
        let mut headed = ProviderConfig::of_kind(ProviderKind::Anthropic);
        headed.headers.insert("x-api-key".into(), "k".into());
        assert!(headed.build_http("p", &none).is_ok());
    }

    #[test]
    fn cache_settings_read_from_toml_and_bad_ones_are_refused() {
        let config: ProviderConfig =
            toml_like(r#"{"kind": "anthropic", "cache_ttl": "1h", "prompt_cache": false}"#)
                .unwrap();
        assert_eq!(config.cache_ttl, buddy_core::CacheTtl::OneHour);
        assert!(!config.prompt_cache);
        assert_eq!(config.openai_compat().prompt_cache_key, Some(false));
        let default: ProviderConfig = toml_like(r#"{"kind": "openai"}"#).unwrap();
        assert!(default.prompt_cache);
        assert_eq!(default.cache_ttl, buddy_core::CacheTtl::FiveMinutes);
        assert_eq!(default.openai_compat().prompt_cache_key, None);
        let error = toml_like(r#"{"kind": "anthropic", "cache_ttl": "2h"}"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("2h"), "{error}");
        let retained: ProviderConfig =
            toml_like(r#"{"kind": "openai", "prompt_cache_retention": "24h"}"#).unwrap();
        assert_eq!(
            retained.openai_compat().prompt_cache_retention.as_deref(),
            Some("24h")
        );
    }

    fn toml_like(json: &str) -> Result<ProviderConfig, serde_json::Error> {
        serde_json::from_str(json)
    }
}
