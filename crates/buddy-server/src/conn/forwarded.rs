//! The client behind a trusted reverse proxy: the last address of `Forwarded` (RFC 7239)
//! or `X-Forwarded-For` that is not itself a trusted proxy. Proxies append the address
//! they saw, so everything left of the first untrusted hop may be forged by the client.

use std::net::IpAddr;

use axum::http::HeaderMap;

use crate::settings::{TrustedProxies, canonical};

/// The client address of a request that reached the server from `peer`: the peer itself
/// unless it is a trusted proxy; else the nearest hop the proxies name that they do not
/// vouch for as one of theirs (the peer, when a hop cannot be read).
pub(crate) fn client_address(
    peer: IpAddr,
    headers: &HeaderMap,
    trusted: &TrustedProxies,
) -> IpAddr {
    let peer = canonical(peer);
    if !trusted.trusts(peer) {
        return peer;
    }
    let hops = forwarded_hops(headers);
    let mut client = peer;
    for hop in hops.iter().rev() {
        let Some(addr) = hop else {
            // `unknown`, an obfuscated name or garbage: nobody can be named beyond it.
            return client;
        };
        client = canonical(*addr);
        if !trusted.trusts(client) {
            return client;
        }
    }
    client
}

/// The hops a request names, first (the original client, as claimed) to last (the one
/// the nearest proxy saw); `None` for a hop that is not an address. `Forwarded` wins
/// over `X-Forwarded-For` when both are sent.
fn forwarded_hops(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().map(str::to_owned).unwrap_or_default())
            .collect()
    };
    let forwarded = values("forwarded");
    if !forwarded.is_empty() {
        return forwarded
            .iter()
            .flat_map(|v| v.split(','))
            .map(|element| {
                element
                    .split(';')
                    .find_map(|pair| {
                        let (name, value) = pair.split_once('=')?;
                        name.trim().eq_ignore_ascii_case("for").then_some(value)
                    })
                    .and_then(forwarded_for)
            })
            .collect();
    }
    values("x-forwarded-for")
        .iter()
        .flat_map(|v| v.split(','))
        .map(|hop| plain_address(hop.trim()))
        .collect()
}

/// A `for=` value: `192.0.2.43`, `"[2001:db8::1]:4711"`, `"192.0.2.43:47011"`.
fn forwarded_for(value: &str) -> Option<IpAddr> {
    plain_address(value.trim().trim_matches('"'))
}

/// An address, with or without a port, IPv6 in brackets or bare.
fn plain_address(text: &str) -> Option<IpAddr> {
    if let Ok(addr) = text.parse::<IpAddr>() {
        return Some(addr);
    }
    if let Some(rest) = text.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    let (host, _port) = text.rsplit_once(':')?;
    host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;
    use crate::settings::Setting;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn only_a_trusted_peer_names_the_client_and_forged_hops_on_the_left_are_ignored() {
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let xff = headers(&[("x-forwarded-for", "6.6.6.6, 203.0.113.9, 10.1.1.1")]);
        // Through two of our proxies: the first hop they do not vouch for.
        assert_eq!(
            client_address(ip("10.0.0.2"), &xff, &trusted),
            ip("203.0.113.9")
        );
        // From anyone else the header counts for nothing.
        assert_eq!(
            client_address(ip("198.51.100.1"), &xff, &trusted),
            ip("198.51.100.1")
        );
        // No header from a proxy: the proxy is the client.
        assert_eq!(
            client_address(ip("10.0.0.2"), &HeaderMap::new(), &trusted),
            ip("10.0.0.2")
        );
        // A hop that is not an address stops the walk at the last one known.
        let garbled = headers(&[("x-forwarded-for", "203.0.113.9, unknown")]);
        assert_eq!(
            client_address(ip("10.0.0.2"), &garbled, &trusted),
            ip("10.0.0.2")
        );
    }

    #[test]
    fn forwarded_is_read_with_ports_brackets_and_quotes_and_wins() {
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
        let both = headers(&[
            (
                "forwarded",
                "for=6.6.6.6, for=\"[2001:db8::7]:4711\";proto=https",
            ),
            ("forwarded", "For=\"10.9.9.9:80\""),
            ("x-forwarded-for", "198.51.100.77"),
        ]);
        assert_eq!(
            client_address(ip("10.0.0.2"), &both, &trusted),
            ip("2001:db8::7")
        );
        let port = headers(&[("x-forwarded-for", "203.0.113.9:5555")]);
        assert_eq!(
            client_address(ip("10.0.0.2"), &port, &trusted),
            ip("203.0.113.9")
        );
        // Every hop trusted: the first one named.
        let inner = headers(&[("x-forwarded-for", "10.3.3.3, 10.4.4.4")]);
        assert_eq!(
            client_address(ip("10.0.0.2"), &inner, &trusted),
            ip("10.3.3.3")
        );
    }
}
