//! Which URLs an attachment may carry: `https:` to a public host, or a well-formed
//! `data:` URL. A model server that fetches image URLs would otherwise fetch, for any
//! client, whatever the operator's network reaches (`http://169.254.169.254`, `file://`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What is wrong with an attachment's URL, said so a client can fix it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AttachmentUrlError {
    #[error(
        "`{scheme}:` URLs are not taken; send an https: URL or a data:<media type>;base64,… URL"
    )]
    Scheme { scheme: String },
    #[error("the URL has no host; send https://host/path")]
    NoHost,
    #[error("the URL names credentials (user@host); send a URL without them")]
    Credentials,
    #[error(
        "the URL's host `{host}`{} is a local or private address, which the model server must not be sent to",
        .read_as.as_ref().map(|read| format!(" (read as `{read}`)")).unwrap_or_default()
    )]
    LocalHost {
        /// The host as the client wrote it.
        host: String,
        /// The address or name URL parsers read it as, when that is spelled otherwise.
        read_as: Option<String>,
    },
    #[error("the data: URL is malformed ({why}); send data:<media type>;base64,<data>")]
    Data { why: &'static str },
    #[error("the URL is malformed ({why}); send https://host/path")]
    Malformed { why: String },
    #[error("a file must be a data: URL (data:<media type>;base64,…); file URLs are not fetched")]
    FileNotData,
}

/// Checks an image URL: `https:` to a public host, or a `data:image/…;base64,…` URL.
pub fn check_image_url(url: &str) -> Result<(), AttachmentUrlError> {
    canonical_image_url(url).map(drop)
}

/// Checks an image URL and gives it as buddy forwards it: an `https:` URL parsed by the
/// WHATWG URL rules that browsers and model servers' fetchers follow (IDNA mapping,
/// percent-decoding, IPv4 in any number form, a trailing dot), its host checked as that
/// parse reads it and the URL re-serialized, so the model server is sent exactly what
/// was checked; a `data:image/…;base64,…` URL unchanged.
pub fn canonical_image_url(url: &str) -> Result<String, AttachmentUrlError> {
    match url.split_once(':') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => canonical_https(url, rest),
        Some((scheme, _)) if scheme.eq_ignore_ascii_case("data") => {
            check_data(url, Some("image/")).map(|()| url.to_owned())
        }
        Some((scheme, _)) => Err(AttachmentUrlError::Scheme {
            scheme: scheme.chars().take(20).collect(),
        }),
        None => Err(AttachmentUrlError::Scheme {
            scheme: String::new(),
        }),
    }
}

/// Checks a file's data: a well-formed `data:<media type>;base64,…` URL.
pub fn check_file_data(data: &str) -> Result<(), AttachmentUrlError> {
    if !data
        .get(..5)
        .is_some_and(|s| s.eq_ignore_ascii_case("data:"))
    {
        return Err(AttachmentUrlError::FileNotData);
    }
    check_data(data, None)
}

/// An `https:` URL (`rest` is what follows the colon): `//host[:port][/…]` to a public
/// host as the WHATWG parse reads it, re-serialized.
fn canonical_https(url: &str, rest: &str) -> Result<String, AttachmentUrlError> {
    // `https:host` and `https:\\host` parse too (WHATWG is lenient); buddy takes `//` only.
    let after = rest.strip_prefix("//").ok_or(AttachmentUrlError::NoHost)?;
    let parsed = url::Url::parse(url).map_err(|e| match e {
        url::ParseError::EmptyHost => AttachmentUrlError::NoHost,
        other => AttachmentUrlError::Malformed {
            why: other.to_string(),
        },
    })?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(AttachmentUrlError::Credentials);
    }
    let written = || {
        let authority = after
            .split(['/', '?', '#', '\\'])
            .next()
            .unwrap_or_default();
        let host = authority.rsplit('@').next().unwrap_or_default();
        host.chars().take(100).collect::<String>()
    };
    let local = |read: String| {
        let host = written();
        let read_as = (!host.eq_ignore_ascii_case(&read)).then_some(read);
        Err(AttachmentUrlError::LocalHost { host, read_as })
    };
    match parsed.host() {
        None => return Err(AttachmentUrlError::NoHost),
        Some(url::Host::Ipv4(v4)) if !is_public_v4(v4) => return local(v4.to_string()),
        Some(url::Host::Ipv6(v6)) if !is_public(IpAddr::V6(v6)) => return local(format!("[{v6}]")),
        Some(url::Host::Domain(name)) if is_local_name(name) => return local(name.to_owned()),
        Some(_) => {}
    }
    Ok(parsed.into())
}

/// A name that resolves inside the operator's network: `localhost` and its subdomains,
/// a single label (`metadata`, resolved by the search domains), names of the reserved
/// private-use suffixes (`.internal`, `.local`, `.home.arpa`). `name` is as the WHATWG
/// parse leaves it: lower case ASCII.
fn is_local_name(name: &str) -> bool {
    let name = name.trim_end_matches('.');
    name == "localhost"
        || !name.contains('.')
        || [
            ".localhost",
            ".internal",
            ".local",
            ".localdomain",
            ".home.arpa",
        ]
        .iter()
        .any(|suffix| name.ends_with(suffix))
}

/// Whether an address is one on the public internet (not loopback, private, link-local
/// — the cloud metadata address —, unspecified, shared, documentation or multicast).
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || a >= 240)
}

/// The IPv4 address an IPv6 one carries: mapped (`::ffff:a.b.c.d`), compatible
/// (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) or 6to4 (`2002:aabb:ccdd::`) — each reaches
/// that IPv4 host.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let [.., a, b, c, d] = ip.octets();
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(Ipv4Addr::new(a, b, c, d));
    }
    if s[0] == 0x2002 {
        let [_, _, e, f, g, h, ..] = ip.octets();
        return Some(Ipv4Addr::new(e, f, g, h));
    }
    if ip.is_loopback() || ip.is_unspecified() {
        return None;
    }
    ip.to_ipv4()
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || (first & 0xffc0) == 0xfec0
        || (first == 0x2001 && ip.segments()[1] == 0x0db8))
}

/// `data:<type>/<subtype>[;params];base64,<base64>`, the type starting with `prefix`.
fn check_data(url: &str, prefix: Option<&str>) -> Result<(), AttachmentUrlError> {
    let bad = |why| Err(AttachmentUrlError::Data { why });
    let rest = &url[5..];
    let Some((header, data)) = rest.split_once(',') else {
        return bad("no comma before the data");
    };
    let Some(media) = header.strip_suffix(";base64") else {
        return bad("not base64: the header must end in ;base64");
    };
    let media = media.split(';').next().unwrap_or_default();
    let Some((kind, subtype)) = media.split_once('/') else {
        return bad("no media type (type/subtype)");
    };
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    if !token(kind) || !token(subtype) {
        return bad("the media type is not type/subtype");
    }
    if let Some(prefix) = prefix
        && !media.to_ascii_lowercase().starts_with(prefix)
    {
        return bad("an image's media type must be image/…");
    }
    if !is_base64(data) {
        return bad("the data is not base64");
    }
    Ok(())
}

/// Standard base64 with optional padding, nothing else (no whitespace), not empty.
fn is_base64(data: &str) -> bool {
    let body = data.trim_end_matches('=');
    let padding = data.len() - body.len();
    !body.is_empty()
        && padding <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        && body.len() % 4 != 1
        && (padding == 0 || data.len().is_multiple_of(4))
}

#[cfg(test)]
#[path = "attachment_url_tests.rs"]
mod tests;
