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
        "the URL's host `{host}` is a local or private address, which the model server must not be sent to"
    )]
    LocalHost { host: String },
    #[error("the data: URL is malformed ({why}); send data:<media type>;base64,<data>")]
    Data { why: &'static str },
    #[error("a file must be a data: URL (data:<media type>;base64,…); file URLs are not fetched")]
    FileNotData,
}

/// Checks an image URL: `https:` to a public host, or a `data:image/…;base64,…` URL.
pub fn check_image_url(url: &str) -> Result<(), AttachmentUrlError> {
    match url.split_once(':') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("https") => check_host(rest),
        Some((scheme, _)) if scheme.eq_ignore_ascii_case("data") => check_data(url, Some("image/")),
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

/// The part after `https:`: `//host[:port][/…]`, the host public.
fn check_host(rest: &str) -> Result<(), AttachmentUrlError> {
    let rest = rest.strip_prefix("//").ok_or(AttachmentUrlError::NoHost)?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(AttachmentUrlError::Credentials);
    }
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    if host.is_empty() {
        return Err(AttachmentUrlError::NoHost);
    }
    let lower = host.trim_end_matches('.').to_ascii_lowercase();
    let local_name = lower == "localhost"
        || lower.ends_with(".localhost")
        || !lower.contains('.') && host.parse::<IpAddr>().is_err();
    let local_ip = host.parse::<IpAddr>().is_ok_and(|ip| !is_public(ip));
    if local_name || local_ip {
        return Err(AttachmentUrlError::LocalHost {
            host: host.to_owned(),
        });
    }
    Ok(())
}

/// Whether an address is one on the public internet (not loopback, private, link-local
/// — the cloud metadata address —, unspecified, shared, documentation or multicast).
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
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

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80)
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
mod tests {
    use super::*;

    #[test]
    fn only_https_to_public_hosts_and_well_formed_data_urls_pass() {
        for good in [
            "https://example.com/cat.png",
            "HTTPS://images.example.org:8443/a?b#c",
            "https://93.184.216.34/x.png",
            "data:image/png;base64,iVBORw0KGgo=",
            "data:image/svg+xml;base64,PHN2Zz4=",
        ] {
            assert_eq!(check_image_url(good), Ok(()), "{good}");
        }
        for bad in [
            "http://169.254.169.254/latest/meta-data/",
            "http://127.0.0.1:8080/",
            "file:///etc/passwd",
            "gopher://127.0.0.1:6379/_INFO",
            "ftp://example.com/x",
            "https://169.254.169.254/latest/meta-data/",
            "https://127.0.0.1/",
            "https://[::1]/",
            "https://[::ffff:10.0.0.1]/",
            "https://10.1.2.3/",
            "https://192.168.0.1/",
            "https://100.64.0.1/",
            "https://0.0.0.0/",
            "https://localhost/x",
            "https://metadata/computeMetadata",
            "https://user:pw@example.com/",
            "https:///nohost",
            "https:example.com",
            "no scheme",
            "data:image/png;base64,",
            "data:image/png;base64,iVBOR w0K",
            "data:image/png,iVBORw0KGgo=",
            "data:;base64,iVBORw0KGgo=",
            "data:text/plain;base64,aGk=",
            "data:image/png;base64iVBORw0KGgo=",
            "data:image/png;base64,a",
            "data:image/png;base64,a===",
        ] {
            assert!(check_image_url(bad).is_err(), "{bad}");
        }
        assert_eq!(
            check_file_data("data:application/pdf;base64,JVBERi0="),
            Ok(())
        );
        assert_eq!(
            check_file_data("https://example.com/a.pdf"),
            Err(AttachmentUrlError::FileNotData)
        );
        assert!(check_file_data("data:application/pdf;base64,%%%").is_err());
    }
}
