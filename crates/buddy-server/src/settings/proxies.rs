//! `[server] trusted_proxies`: the addresses (single ones or CIDR blocks) of reverse
//! proxies whose `Forwarded` / `X-Forwarded-For` client address counts as the client's.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Deserializer};

use super::table::Setting;

/// One trusted address or block (`10.0.0.0/8`, `192.168.1.7`, `fd00::/8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpBlock {
    base: IpAddr,
    prefix: u8,
}

impl IpBlock {
    /// Whether `addr` lies in the block (an IPv4 client seen over IPv6 counts as IPv4).
    pub fn contains(&self, addr: IpAddr) -> bool {
        match (self.base, canonical(addr)) {
            (IpAddr::V4(base), IpAddr::V4(addr)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(base) & mask == u32::from(addr) & mask
            }
            (IpAddr::V6(base), IpAddr::V6(addr)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(base) & mask == u128::from(addr) & mask
            }
            _ => false,
        }
    }
}

impl std::str::FromStr for IpBlock {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let wrong =
            || format!("`{text}` is not an IP address or a CIDR block (such as 10.0.0.0/8)");
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let base = canonical(addr.parse::<IpAddr>().map_err(|_| wrong())?);
        let most = if base.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => most,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= most)
                .ok_or_else(wrong)?,
        };
        Ok(IpBlock { base, prefix })
    }
}

impl fmt::Display for IpBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.base, self.prefix)
    }
}

/// The reverse proxies a server trusts; empty (the default): none, every client address
/// is the socket's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpBlock>);

impl TrustedProxies {
    /// Whether `addr` is one of the trusted proxies.
    pub fn trusts(&self, addr: IpAddr) -> bool {
        self.0.iter().any(|block| block.contains(addr))
    }

    /// True when no proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Setting for TrustedProxies {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let texts = Vec::<String>::deserialize(deserializer)?;
        texts
            .iter()
            .map(|t| t.parse())
            .collect::<Result<_, _>>()
            .map(TrustedProxies)
            .map_err(serde::de::Error::custom)
    }

    fn parse(text: &str) -> Result<Self, String> {
        text.split(',')
            .filter(|t| !t.trim().is_empty())
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map(TrustedProxies)
    }
}

/// An IPv4 address seen through an IPv6 socket counts as its IPv4 address.
pub(crate) fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn blocks_and_single_addresses_are_read_and_matched() {
        let trusted = TrustedProxies::parse("10.0.0.0/8, 192.168.1.7,fd00::/8").unwrap();
        assert!(trusted.trusts(ip("10.200.3.4")));
        assert!(trusted.trusts(ip("192.168.1.7")));
        assert!(!trusted.trusts(ip("192.168.1.8")));
        assert!(trusted.trusts(ip("fd12::1")));
        assert!(!trusted.trusts(ip("fe80::1")));
        // An IPv4 proxy seen over an IPv6 socket.
        assert!(trusted.trusts(ip("::ffff:10.1.2.3")));
        assert!(TrustedProxies::parse("").unwrap().is_empty());
        assert!(
            TrustedProxies::parse("0.0.0.0/0")
                .unwrap()
                .trusts(ip("8.8.8.8"))
        );
        for wrong in ["10.0.0.0/33", "proxy.internal", "10.0.0.1/x"] {
            let error = TrustedProxies::parse(wrong).unwrap_err();
            assert!(error.contains("not an IP address"), "{error}");
        }
    }
}
