//! Prompt caching: how long a provider keeps a cached prefix, and the cache breakpoints
//! a client placed itself (kept and sent as placed, never moved).

use serde::{Deserialize, Serialize};

/// How long a provider keeps a prompt-cache entry (Anthropic's `cache_control.ttl`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum CacheTtl {
    /// Five minutes, refreshed by every read (writes billed 1.25× the input price).
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    /// One hour (writes billed 2× the input price).
    #[serde(rename = "1h")]
    OneHour,
}

impl CacheTtl {
    /// Its name on the wire and in buddy.toml (`5m`, `1h`).
    pub fn as_str(self) -> &'static str {
        match self {
            CacheTtl::FiveMinutes => "5m",
            CacheTtl::OneHour => "1h",
        }
    }
}

/// A cache breakpoint a client put on a message (on its last content block): the
/// provider writes the prefix up to there to its cache. buddy keeps it where the client
/// put it and counts it against the provider's limit of breakpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CacheMark {
    /// The index of the marked message in the request's `messages`.
    pub message: usize,
    /// The lifetime the client asked for.
    #[serde(default)]
    pub ttl: CacheTtl,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_read_and_write_as_the_api_names_them() {
        assert_eq!(
            serde_json::to_string(&CacheTtl::OneHour).unwrap(),
            r#""1h""#
        );
        assert_eq!(
            serde_json::from_str::<CacheTtl>(r#""5m""#).unwrap(),
            CacheTtl::FiveMinutes
        );
        assert!(serde_json::from_str::<CacheTtl>(r#""2h""#).is_err());
        assert_eq!(CacheTtl::default().as_str(), "5m");
    }
}
