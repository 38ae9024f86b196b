//! Cross-origin access for browser pages on other origins (`[server] cors_origins`): their
//! preflights answered, their requests' responses readable, with the headers buddy's
//! clients send and the ones buddy answers with. No origin is allowed unless listed.

use axum::http::{HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowHeaders, CorsLayer};

/// The response headers a page may read besides the simple ones.
const EXPOSED: [&str; 4] = [
    "buddy-stop-reason",
    "buddy-turn-id",
    "buddy-warning",
    "retry-after",
];

/// How long a browser may keep a preflight's answer.
const MAX_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// The listed origins as header values, or what is wrong with one: an origin is a scheme,
/// a host and an optional port (`https://app.example.com:8443`), nothing else.
pub(crate) fn origins(listed: &[String]) -> Result<Vec<HeaderValue>, String> {
    listed
        .iter()
        .map(|origin| {
            let bad = |why: &str| {
                format!(
                    "[server] cors_origins: `{origin}` is not a web origin ({why}); write it as \
                     scheme://host[:port], e.g. https://app.example.com"
                )
            };
            let url = url::Url::parse(origin).map_err(|e| bad(&e.to_string()))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(bad("it needs http:// or https:// and a host"));
            }
            let canonical = url.origin().ascii_serialization();
            if canonical != origin.trim_end_matches('/') {
                return Err(bad("no path, query, user or trailing parts"));
            }
            HeaderValue::from_str(&canonical).map_err(|e| bad(&e.to_string()))
        })
        .collect()
}

/// The CORS layer for `listed`; `None` when none is listed (or one is malformed: `serve`
/// refuses to start then, naming it).
pub(crate) fn layer(listed: &[String]) -> Option<CorsLayer> {
    let origins = origins(listed).ok().filter(|o| !o.is_empty())?;
    let exposed: Vec<HeaderName> = EXPOSED.iter().map(|h| HeaderName::from_static(h)).collect();
    Some(
        CorsLayer::new()
            .allow_origin(origins)
            .allow_methods([
                Method::GET,
                Method::POST,
                Method::PATCH,
                Method::DELETE,
                Method::OPTIONS,
            ])
            .allow_headers(AllowHeaders::mirror_request())
            .expose_headers(exposed)
            .max_age(MAX_AGE),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_host_and_port_only() {
        let good = ["https://app.example.com", "http://127.0.0.1:5173"].map(str::to_owned);
        assert_eq!(origins(&good).map(|o| o.len()), Ok(2));
        for bad in [
            "app.example.com",
            "https://app.example.com/chat",
            "ftp://files.example.com",
            "https://user@app.example.com",
            "*",
        ] {
            let err = origins(&[bad.to_owned()]).unwrap_err();
            assert!(err.contains(bad) && err.contains("scheme://host"), "{err}");
        }
        assert!(layer(&[]).is_none());
        assert!(layer(&good).is_some());
    }
}
