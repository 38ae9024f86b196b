//! The keys a server accepts, from where the operator gives them: `--api-key` flags,
//! the comma-separated variable `api_keys_env`, and named `[[server.keys]]`, each by its
//! environment variable or its hash (never written into buddy.toml itself).

use buddy_core::Usd;
use serde::Deserialize;

use super::{ApiKey, BadKeyHash, ServerSettings, SpendCeiling};

/// One `[[server.keys]]` entry: a named API key, given by the environment variable that
/// holds it or by its SHA-256.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    pub name: String,
    /// Environment variable holding the key.
    #[serde(default)]
    pub key_env: Option<String>,
    /// Hex SHA-256 of the key (`printf %s "$KEY" | sha256sum`).
    #[serde(default)]
    pub key_sha256: Option<String>,
    /// May list, read and delete every conversation.
    #[serde(default)]
    pub admin: bool,
    /// This key's own spend ceilings (US dollars per UTC day / calendar month).
    #[serde(default)]
    pub max_daily_cost_usd: Option<Usd>,
    #[serde(default)]
    pub max_monthly_cost_usd: Option<Usd>,
}

/// A declared key that cannot be accepted, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "[[server.keys]] `{name}`: environment variable {var} is not set; set it to the key, or give key_sha256 instead"
    )]
    Unset { name: String, var: String },
    #[error(
        "[[server.keys]] `{name}`: give exactly one of key_env (the variable holding the key) or key_sha256"
    )]
    OneOf { name: String },
    #[error("[[server.keys]]: two keys are named `{name}`; names must differ")]
    Twice { name: String },
    #[error(transparent)]
    BadHash(#[from] BadKeyHash),
}

impl ServerSettings {
    /// Every accepted key: `flags` (`--api-key`), the unnamed ones of `api_keys_env`, and
    /// the named `keys`; `env` reads an environment variable.
    pub fn accepted_keys(
        &self,
        flags: &[String],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<ApiKey>, KeyError> {
        let mut keys: Vec<ApiKey> = flags.iter().map(|k| ApiKey::new(k, None, false)).collect();
        if let Some(listed) = env(&self.api_keys_env) {
            keys.extend(
                listed
                    .split(',')
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                    .map(|k| ApiKey::new(k, None, false)),
            );
        }
        for declared in &self.keys {
            let key = declared.key(env)?;
            if keys.iter().any(|k| k.name == key.name) {
                return Err(KeyError::Twice {
                    name: declared.name.clone(),
                });
            }
            keys.push(key);
        }
        Ok(keys)
    }
}

impl KeyConfig {
    /// The key this entry declares, with its own spend ceilings.
    fn key(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<ApiKey, KeyError> {
        let name = &self.name;
        let key = match (&self.key_env, &self.key_sha256) {
            (Some(var), None) => match env(var).filter(|k| !k.trim().is_empty()) {
                Some(key) => ApiKey::new(&key, Some(name), self.admin),
                None => {
                    return Err(KeyError::Unset {
                        name: name.clone(),
                        var: var.clone(),
                    });
                }
            },
            (None, Some(hash)) => ApiKey::from_sha256(hash, name, self.admin)?,
            _ => return Err(KeyError::OneOf { name: name.clone() }),
        };
        Ok(match (self.max_daily_cost_usd, self.max_monthly_cost_usd) {
            (None, None) => key,
            (daily, monthly) => key.with_spend(SpendCeiling { daily, monthly }),
        })
    }
}
