//! buddy-providers: the model servers buddy talks to over HTTP — OpenAI-compatible and
//! Anthropic, streaming and not — with buddy's own SSE decoder and tool-call assembly
//! (every provider's quirks live there). The OpenAI wire types are `buddy-openai-wire`;
//! the offline scripted model is `buddy-scripted`.

pub mod anthropic;
mod config;
mod http;
mod lenient;
pub mod openai;
mod served_by;
pub mod sse;
pub mod tool_call_assembler;
mod watchdog;

pub use anthropic::{AnthropicOptions, AnthropicProvider};
pub use buddy_core::{redact_url, redact_urls_in};
pub use config::{ProviderConfig, ProviderKind};
pub use http::{HttpSettings, USER_AGENT, install_crypto_provider};
pub use openai::{OpenAiCompat, OpenAiOptions, OpenAiProvider, OutputLimitField};
pub use served_by::genai_provider_name;
