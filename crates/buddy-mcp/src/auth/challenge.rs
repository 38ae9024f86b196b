//! The server's `WWW-Authenticate` challenge behind a failed request, if that is why.

use rmcp::service::ServiceError;
use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};

/// The challenge of the 401 (no or expired token) or 403 (insufficient scope) a failed
/// request met, if that is why it failed (the transport's error says so).
pub(crate) fn challenge_of(error: &ServiceError) -> Option<String> {
    match error {
        ServiceError::TransportSend(error) => in_chain(error),
        _ => None,
    }
}

/// The challenge `error`, or an error it wraps, carries.
fn in_chain(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(required) = error.downcast_ref::<AuthRequiredError>() {
            return Some(required.www_authenticate_header.clone());
        }
        if let Some(scope) = error.downcast_ref::<InsufficientScopeError>() {
            return Some(scope.www_authenticate_header.clone());
        }
        current = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("wrapped")]
    struct Wrapped(#[source] InsufficientScopeError);

    #[test]
    fn the_challenge_is_found_under_wrapping_errors() {
        let header = r#"Bearer error="insufficient_scope", scope="mcp:write""#;
        let error = Wrapped(InsufficientScopeError::new(
            header.to_owned(),
            Some("mcp:write".into()),
        ));
        assert_eq!(in_chain(&error).as_deref(), Some(header));
        let plain = std::io::Error::other("reset");
        assert_eq!(in_chain(&plain), None);
        assert_eq!(challenge_of(&ServiceError::TransportClosed), None);
    }
}
