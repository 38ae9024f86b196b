//! How a server is set up: its settings (one table: [`SERVER_FIELDS`]), the keys it
//! accepts, and what each key may spend.

mod api_key;
mod fields;
mod keys;
mod proxies;
mod table;

use buddy_core::Usd;
use serde::Deserialize;

pub(crate) use api_key::key_for;
pub use api_key::{ApiKey, BadKeyHash};
pub use fields::{DEFAULT_MAX_STORED_BYTES_PER_KEY, SERVER_FIELDS, ServerSettings};
pub use keys::{KeyConfig, KeyError};
pub use proxies::TrustedProxies;
pub(crate) use proxies::canonical;
pub use table::{Setting, SettingCheck, SettingError, SettingField, SettingFlag};

/// What one key may spend in US dollars, per UTC day and per UTC calendar month.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpendCeiling {
    pub daily: Option<Usd>,
    pub monthly: Option<Usd>,
}

impl SpendCeiling {
    /// True when neither a daily nor a monthly ceiling is set.
    pub fn is_none(&self) -> bool {
        self.daily.is_none() && self.monthly.is_none()
    }
}

/// How buddy's server-side skill calls appear among a response's output items.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum SkillCalls {
    /// `mcp_call` items (`server_label: "buddy"`): what the OpenAI SDKs and the clients
    /// built on them read.
    #[default]
    #[serde(rename = "mcp_call")]
    McpCall,
    /// `buddy:skill_call` items: an implementor-prefixed extension item, as the Open
    /// Responses specification asks of items it does not define.
    #[serde(rename = "buddy:skill_call")]
    Extension,
}
