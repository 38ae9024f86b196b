//! Credentials taken out of a URL before it is shown: a `base_url` may carry them
//! (`https://user:pass@host/v1`, `…?key=…`), and the URL appears in errors sent to API
//! clients, in logs and in exported spans.

/// Query parameters shown as they are: known not to be secrets (Azure's `api-version`).
const PLAIN_PARAMETERS: [&str; 3] = ["api-version", "api_version", "version"];

/// What stands for a removed secret.
const HIDDEN: &str = "***";

/// `url` as it may be shown: user name and password replaced by `***`, every query value
/// but a version's replaced by `***`, no fragment. Text that is not a URL loses whatever
/// could be credentials (before an `@`, after a `?` or `#`).
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        // Nothing to take out: shown as given, not as the parser would spell it.
        Ok(parsed)
            if parsed.username().is_empty()
                && parsed.password().is_none()
                && parsed.query().is_none()
                && parsed.fragment().is_none() =>
        {
            url.to_owned()
        }
        Ok(parsed) if parsed.has_host() => redact_parsed(parsed),
        _ => redact_text(url),
    }
}

/// `text` with every URL in it (`scheme://…`, up to a space, a quote or a bracket)
/// shown as [`redact_url`] shows it: for messages that may quote one (an error, a log
/// line, a span's status).
pub fn redact_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let tail = &rest[at + 3..];
        let len = tail
            .find(|c: char| {
                c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>' | '(' | ')')
            })
            .unwrap_or(tail.len());
        let mut end = at + 3 + len;
        // Punctuation that ends a sentence is not part of the URL.
        while end > at + 3 && rest[..end].ends_with(['.', ',', ';', ':']) {
            end -= 1;
        }
        let url = &rest[start..end];
        out.push_str(&rest[..start]);
        if url.contains(['@', '?', '#']) {
            out.push_str(&redact_url(url));
        } else {
            out.push_str(url);
        }
        rest = &rest[end..];
        if end == 0 {
            // Not reached (a match consumes "://"), but never loop without progress.
            break;
        }
    }
    out.push_str(rest);
    out
}

fn redact_parsed(mut url: url::Url) -> String {
    if !url.username().is_empty() || url.password().is_some() {
        let _ = url.set_username(HIDDEN);
        let _ = url.set_password(None);
    }
    if url.query().is_some() {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(name, value)| {
                let plain = PLAIN_PARAMETERS.contains(&name.to_ascii_lowercase().as_str());
                let shown = if plain {
                    value.into_owned()
                } else {
                    HIDDEN.to_owned()
                };
                (name.into_owned(), shown)
            })
            .collect();
        url.set_query(None);
        if !pairs.is_empty() {
            url.query_pairs_mut().extend_pairs(pairs);
        }
    }
    url.set_fragment(None);
    url.to_string()
}

fn redact_text(text: &str) -> String {
    let (text, cut) = match text.find(['?', '#']) {
        Some(at) => (&text[..at], "?***"),
        None => (text, ""),
    };
    let start = text.find("://").map_or(0, |at| at + 3);
    let authority_end = text[start..].find('/').map_or(text.len(), |at| start + at);
    match text[start..authority_end].rfind('@') {
        Some(at) => format!("{}{HIDDEN}{}{cut}", &text[..start], &text[start + at..]),
        None => format!("{text}{cut}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{redact_url, redact_urls_in};

    #[test]
    fn urls_inside_a_message_are_redacted() {
        let message = "openai: could not connect to https://u:s3cr3t@h.example/v1?key=s3cr3t. \
                       (see http://plain.example/docs), ok";
        let shown = redact_urls_in(message);
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(
            shown.contains("https://***@h.example/v1?key=***. (see http://plain.example/docs), ok"),
            "{shown}"
        );
        assert_eq!(redact_urls_in("no url here"), "no url here");
    }

    #[test]
    fn credentials_leave_and_the_rest_stays() {
        for (given, shown) in [
            (
                "https://user:s3cr3t@api.example.com/v1",
                "https://***@api.example.com/v1",
            ),
            (
                "https://tok3n@api.example.com/v1",
                "https://***@api.example.com/v1",
            ),
            (
                "https://api.example.com/v1?key=s3cr3t&api-version=2024-06-01",
                "https://api.example.com/v1?key=***&api-version=2024-06-01",
            ),
            (
                "http://127.0.0.1:8080/v1/chat/completions",
                "http://127.0.0.1:8080/v1/chat/completions",
            ),
            ("https://h/v1#s3cr3t", "https://h/v1"),
            ("HTTP://Host.Example:8080", "HTTP://Host.Example:8080"),
            (
                "user:s3cr3t@host:8080/v1?key=s3cr3t",
                "***@host:8080/v1?***",
            ),
            ("http://user:s3cr3t@[::1", "http://***@[::1"),
        ] {
            assert_eq!(redact_url(given), shown, "{given}");
            assert!(!redact_url(given).contains("s3cr3t"), "{given}");
        }
    }
}
