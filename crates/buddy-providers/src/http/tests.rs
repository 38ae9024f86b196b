//! Tests of the shared HTTP pieces.

use super::*;

fn endpoint(url: &str, headers: &[(&str, &str)]) -> Result<Endpoint, ProviderError> {
    let settings = HttpSettings::default();
    let client = build_client("p", &settings)?;
    let headers = headers
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    Endpoint::new("p".to_owned(), url.to_owned(), client, headers, settings)
}

fn config_message(result: Result<Endpoint, ProviderError>) -> String {
    match result {
        Err(ProviderError::Config { message, .. }) => message,
        Err(other) => panic!("expected a configuration error, got {other}"),
        Ok(_) => panic!("expected a configuration error, got an endpoint"),
    }
}

#[test]
fn headers_are_checked_once_and_keys_are_hidden() {
    let ok = endpoint(
        "http://127.0.0.1:9/v1/chat/completions",
        &[("Authorization", "Bearer sk-1"), ("X-Extra", "yes")],
    )
    .expect("a valid endpoint");
    assert_eq!(ok.headers["content-type"], "application/json");
    assert!(ok.headers["authorization"].is_sensitive());
    assert!(!ok.headers["x-extra"].is_sensitive());
    assert!(!format!("{:?}", ok.headers).contains("sk-1"));

    let name = config_message(endpoint("http://127.0.0.1:9/x", &[("bad name", "v")]));
    assert!(name.contains("header name `bad name`"), "{name}");
    let value = config_message(endpoint("http://127.0.0.1:9/x", &[("x-a", "line\nbreak")]));
    assert!(value.contains("header `x-a`"), "{value}");
    let url = config_message(endpoint("127.0.0.1:9/chat/completions", &[]));
    assert!(url.contains("check base_url"), "{url}");
}
