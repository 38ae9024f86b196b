//! Why an MCP server could not be reached, as a person reads it: the short cause at the
//! bottom of the transport's error chain ("connection refused at http://…/mcp"), never the
//! transport's Rust type names.

use std::error::Error;
use std::io::ErrorKind;

use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

/// What went wrong opening the connection to the server at `url` (`None`: a process).
pub(super) fn init_failure(error: &ClientInitializeError, url: Option<&str>) -> String {
    let ClientInitializeError::TransportError { error, .. } = error else {
        return format!("initialize failed ({error})");
    };
    let cause = short_cause(error.error.as_ref());
    match url {
        Some(url) => format!("{cause} at {url}"),
        None => cause,
    }
}

/// The deepest error of `error`'s chain in words: a refused or reset connection by its
/// name, anything else by its own message.
fn short_cause(error: &(dyn Error + 'static)) -> String {
    let mut deepest = error;
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            match io.kind() {
                ErrorKind::ConnectionRefused => return "connection refused".into(),
                ErrorKind::ConnectionReset => return "connection reset".into(),
                ErrorKind::TimedOut => return "connection timed out".into(),
                _ => {}
            }
        }
        deepest = e;
        current = match e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            // It shows the HTTP client's error without naming it its source.
            Some(StreamableHttpError::Client(inner)) => Some(inner),
            _ => e.source(),
        };
    }
    let text = deepest.to_string();
    // An OS error's text ends with its number ("… (os error 101)"): a reader needs the words.
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_owned(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::transport::DynamicTransportError;

    /// An error with a source, as transports wrap theirs.
    #[derive(Debug, thiserror::Error)]
    #[error("Client error: error sending request")]
    struct Wrapped(#[source] std::io::Error);

    fn transport_error(inner: std::io::Error) -> ClientInitializeError {
        ClientInitializeError::TransportError {
            error: DynamicTransportError::from_parts(
                "rmcp::transport::worker::WorkerTransport<Some<Long<Type>>>",
                std::any::TypeId::of::<Wrapped>(),
                Box::new(Wrapped(inner)),
            ),
            context: "send initialize request".into(),
        }
    }

    #[test]
    fn a_refused_connection_is_named_with_its_url_and_no_type_names() {
        let refused = transport_error(std::io::Error::from(ErrorKind::ConnectionRefused));
        assert_eq!(
            init_failure(&refused, Some("http://127.0.0.1:9/mcp")),
            "connection refused at http://127.0.0.1:9/mcp"
        );
        let other = transport_error(std::io::Error::other(
            "dns error: no such host (os error 2)",
        ));
        let said = init_failure(&other, Some("http://nowhere.invalid/mcp"));
        assert_eq!(
            said,
            "dns error: no such host at http://nowhere.invalid/mcp"
        );
        assert!(!said.contains("rmcp::"), "{said}");
    }

    #[test]
    fn other_failures_keep_their_own_words() {
        let closed = ClientInitializeError::ConnectionClosed("eof".into());
        assert_eq!(
            init_failure(&closed, None),
            "initialize failed (connection closed: eof)"
        );
    }
}
