//! buddy-providers: the models buddy can drive.
//!
//! The OpenAI-compatible and Anthropic streaming providers, with buddy's own SSE
//! decoder and tool-call assembly (every provider's quirks live there), and the
//! [`scripted`] model: a deterministic offline model driven by JSON scenarios.

pub mod anthropic;
mod config;
mod http;
mod lenient;
pub mod openai;
pub mod scripted;
pub mod sse;
pub mod tool_call_assembler;

pub use anthropic::{AnthropicOptions, AnthropicProvider};
pub use config::{ProviderConfig, ProviderKind};
pub use http::{HttpSettings, USER_AGENT, install_crypto_provider};
pub use openai::{OpenAiCompat, OpenAiOptions, OpenAiProvider};
pub use scripted::{Scenario, ScenarioError, ScriptedProvider};
