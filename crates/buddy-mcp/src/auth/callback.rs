//! The loopback redirect of a native OAuth client (RFC 8252): buddy listens on
//! 127.0.0.1 and the browser is sent back there with the authorization code.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Longest request head read from the browser.
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// Requests answered (favicons, probes) before the callback must have come.
const MAX_REQUESTS: usize = 16;

/// The path the browser is sent back to.
const CALLBACK_PATH: &str = "/callback";

/// A listener waiting for one authorization callback.
pub struct Callback {
    listener: TcpListener,
    redirect_uri: String,
}

impl Callback {
    /// Listens on 127.0.0.1 at `port` (any free one when `None`).
    pub async fn bind(port: Option<u16>) -> Result<Callback, String> {
        let listener = TcpListener::bind(("127.0.0.1", port.unwrap_or(0)))
            .await
            .map_err(|e| format!("cannot listen on 127.0.0.1 for the OAuth redirect: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("cannot read the redirect listener's port: {e}"))?
            .port();
        Ok(Callback {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}{CALLBACK_PATH}"),
        })
    }

    /// The redirect URI to register and send: `http://127.0.0.1:PORT/callback`.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Waits up to `wait` for the browser's callback and returns its whole URL; an
    /// `error=` callback (the person or the server refused) is an error saying so.
    pub async fn wait(self, wait: Duration) -> Result<String, String> {
        tokio::time::timeout(wait, self.serve())
            .await
            .map_err(|_| {
                format!(
                    "nobody finished the authorization in the browser within {}s",
                    wait.as_secs()
                )
            })?
    }

    async fn serve(self) -> Result<String, String> {
        for _ in 0..MAX_REQUESTS {
            let (mut stream, _) = self
                .listener
                .accept()
                .await
                .map_err(|e| format!("the OAuth redirect listener failed: {e}"))?;
            let target = read_target(&mut stream).await;
            let (status, page, outcome) = match target.as_deref().map(parse_target) {
                Some(Target::Callback(query)) => match callback_error(&query) {
                    Some(refused) => (
                        "400 Bad Request",
                        "Authorization refused.",
                        Some(Err(refused)),
                    ),
                    None => (
                        "200 OK",
                        "buddy is authorized. You can close this tab.",
                        Some(Ok(format!("{}?{query}", self.redirect_uri))),
                    ),
                },
                Some(Target::Other) | None => ("404 Not Found", "Not the OAuth callback.", None),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
            if let Some(outcome) = outcome {
                return outcome;
            }
        }
        Err(format!(
            "the OAuth redirect listener got {MAX_REQUESTS} requests and none was the callback"
        ))
    }
}

/// The request target of an HTTP request head (`GET /callback?… HTTP/1.1`), bounded.
async fn read_target(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 2048];
    while !head.windows(2).any(|w| w == b"\r\n") && head.len() < MAX_REQUEST_BYTES {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let line = head.split(|&b| b == b'\r' || b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split(' ');
    match (words.next(), words.next()) {
        (Some("GET"), Some(target)) => Some(target.to_owned()),
        _ => None,
    }
}

/// What a request asked for.
#[derive(Debug, PartialEq)]
enum Target {
    /// The callback, with its query.
    Callback(String),
    Other,
}

fn parse_target(target: &str) -> Target {
    match target.split_once('?') {
        Some((CALLBACK_PATH, query)) => Target::Callback(query.to_owned()),
        _ => Target::Other,
    }
}

/// `error` and `error_description` of a refused authorization, as a sentence.
fn callback_error(query: &str) -> Option<String> {
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let error = field("error")?;
    Some(match field("error_description") {
        Some(description) => format!("the authorization server refused: {error} ({description})"),
        None => format!("the authorization server refused: {error}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(port: u16, target: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        stream
            .write_all(format!("GET {target} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
            .await
            .expect("write");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("read");
        answer
    }

    fn port(uri: &str) -> u16 {
        let rest = uri.trim_start_matches("http://127.0.0.1:");
        rest.split('/')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port")
    }

    #[tokio::test]
    async fn the_callback_url_comes_back_after_other_requests_are_turned_away() {
        let callback = Callback::bind(None).await.expect("bind");
        let uri = callback.redirect_uri().to_owned();
        let port = port(&uri);
        let waiting = tokio::spawn(callback.wait(Duration::from_secs(10)));
        assert!(get(port, "/favicon.ico").await.starts_with("HTTP/1.1 404"));
        assert!(
            get(port, "/callback?code=abc&state=xyz&iss=https%3A%2F%2Fas")
                .await
                .starts_with("HTTP/1.1 200")
        );
        let url = waiting.await.expect("join").expect("callback");
        assert_eq!(
            url,
            format!("{uri}?code=abc&state=xyz&iss=https%3A%2F%2Fas")
        );
    }

    #[tokio::test]
    async fn a_refused_authorization_is_an_error_naming_why() {
        let callback = Callback::bind(None).await.expect("bind");
        let port = port(callback.redirect_uri());
        let waiting = tokio::spawn(callback.wait(Duration::from_secs(10)));
        let answer = get(
            port,
            "/callback?error=access_denied&error_description=the+user+said+no",
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        let error = waiting.await.expect("join").expect_err("refused");
        assert_eq!(
            error,
            "the authorization server refused: access_denied (the user said no)"
        );
    }

    #[tokio::test]
    async fn garbage_and_silence_do_not_end_the_wait_but_the_deadline_does() {
        let callback = Callback::bind(None).await.expect("bind");
        let port = port(callback.redirect_uri());
        let waiting = tokio::spawn(callback.wait(Duration::from_millis(300)));
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        stream.write_all(&[0xff; 64]).await.expect("write");
        drop(stream);
        let error = waiting.await.expect("join").expect_err("timed out");
        assert!(error.contains("within 0s"), "{error}");
    }

    #[test]
    fn only_the_callback_path_counts() {
        assert_eq!(
            parse_target("/callback?code=1"),
            Target::Callback("code=1".into())
        );
        assert_eq!(parse_target("/callbackx?code=1"), Target::Other);
        assert_eq!(parse_target("/callback"), Target::Other);
    }
}
