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

/// Every spelling of loopback, private and metadata addresses that WHATWG URL parsers
/// (and glibc's `inet_aton`) read as a local address is refused, as it is read.
#[test]
fn every_spelling_of_a_local_address_is_refused() {
    for host in [
        // IPv4 number forms: short, hex, octal, one number, trailing dot.
        "127.1",
        "0x7f.1",
        "0177.0.0.1",
        "0x7f000001",
        "2130706433",
        "017700000001",
        "127.0.0.1.",
        "0251.0376.0251.0376",
        "169.254.169.254.",
        "0xa9.0xfe.0xa9.0xfe",
        "0xa9fea9fe",
        "2852039166",
        "169.254.43518",
        "0xa.1",
        "192.168.1",
        "0",
        "127.0.0.1:443",
        // Full-width and circled digits (IDNA maps them to ASCII digits).
        "１２７.０.０.１",
        "１６９.２５４.１６９.２５４",
        "①②⑦.⓪.⓪.①",
        "①⑥⑨.②⑤④.①⑥⑨.②⑤④",
        "127。0。0。1",
        // Percent-encoded digits and dots.
        "%31%32%37.0.0.1",
        "%31%36%39.254.169.254",
        "127%2e0%2e0%2e1",
        // IPv6 forms that carry an IPv4 address.
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[::127.0.0.1]",
        "[0:0:0:0:0:ffff:169.254.169.254]",
        "[64:ff9b::a9fe:a9fe]",
        "[2002:7f00:1::]",
        "[fec0::1]",
        // Names.
        "LOCALHOST",
        "localhost.",
        "ｌｏｃａｌｈｏｓｔ",
        "%6c%6f%63%61%6c%68%6f%73%74",
        "api.localhost",
        "metadata.google.internal",
        "printer.local",
    ] {
        let url = format!("https://{host}/latest/meta-data/");
        let error = canonical_image_url(&url).unwrap_err();
        assert!(
            matches!(error, AttachmentUrlError::LocalHost { .. }),
            "{url}: {error:?}"
        );
    }
    let said = canonical_image_url("https://0251.0376.0251.0376/").unwrap_err();
    assert!(
        said.to_string()
            .contains("`0251.0376.0251.0376` (read as `169.254.169.254`)"),
        "{said}"
    );
}

/// Public URLs pass, and what is forwarded is the URL as parsed, not the client's text.
#[test]
fn public_urls_pass_and_are_forwarded_as_parsed() {
    for (given, forwarded) in [
        ("https://example.com/cat.png", "https://example.com/cat.png"),
        ("HTTPS://Example.COM/a?b#c", "https://example.com/a?b#c"),
        (
            "https://ｅｘａｍｐｌｅ.com/x.png",
            "https://example.com/x.png",
        ),
        (
            "https://bücher.example/x",
            "https://xn--bcher-kva.example/x",
        ),
        ("https://93.184.216.34/x.png", "https://93.184.216.34/x.png"),
        ("https://0x5d.0xb8.0xd8.0x22/", "https://93.184.216.34/"),
        ("https://8.8.8.8./x", "https://8.8.8.8/x"),
        ("https://example.com:443/x", "https://example.com/x"),
        (
            "https://[2606:2800:220:1:248:1893:25c8:1946]/x",
            "https://[2606:2800:220:1:248:1893:25c8:1946]/x",
        ),
        ("https://example.com/a b", "https://example.com/a%20b"),
    ] {
        assert_eq!(
            canonical_image_url(given).as_deref(),
            Ok(forwarded),
            "{given}"
        );
    }
    let data = "data:image/png;base64,iVBORw0KGgo=";
    assert_eq!(canonical_image_url(data).as_deref(), Ok(data));
    for malformed in [
        "https://exa mple.com/",
        "https://example.com:99999/",
        "https://[::1/",
    ] {
        assert!(canonical_image_url(malformed).is_err(), "{malformed}");
    }
    assert_eq!(
        canonical_image_url("https://user@example.com/"),
        Err(AttachmentUrlError::Credentials)
    );
    assert_eq!(
        canonical_image_url("https://example.com@127.0.0.1/"),
        Err(AttachmentUrlError::Credentials)
    );
}
