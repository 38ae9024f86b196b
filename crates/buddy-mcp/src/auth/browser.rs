//! Where the person authorizes buddy: the URL of the authorization server's page,
//! opened in a browser (or, with no person, fetched by a headless one).

use futures::future::BoxFuture;

/// Sends the person to an authorization page; the page sends the browser back to
/// buddy's loopback callback when they are done.
pub trait Browser: Send + Sync {
    /// Shows `url` (the authorization page of MCP server `server`).
    fn open<'a>(&'a self, server: &'a str, url: &'a str) -> BoxFuture<'a, Result<(), String>>;
}

/// A person at a terminal: the URL on stderr, and `$BROWSER URL` started when set.
pub struct TerminalBrowser;

impl Browser for TerminalBrowser {
    fn open<'a>(&'a self, server: &'a str, url: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            eprintln!(
                "buddy: MCP server `{server}` asks you to authorize buddy. Open this address in a browser:\n\n  {url}\n"
            );
            let started = std::env::var_os("BROWSER")
                .filter(|b| !b.is_empty())
                .map(|browser| {
                    std::process::Command::new(browser)
                        .arg(url)
                        .stdin(std::process::Stdio::null())
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .spawn()
                });
            if let Some(Err(e)) = started {
                eprintln!("buddy: could not start $BROWSER ({e}); open the address by hand");
            }
            Ok(())
        })
    }
}

/// No person: fetches the page and follows its redirects, as a browser would when the
/// authorization server approves without asking (test and conformance servers).
pub struct HeadlessBrowser;

/// Redirects a headless visit follows.
const MAX_REDIRECTS: usize = 5;

impl Browser for HeadlessBrowser {
    fn open<'a>(&'a self, _server: &'a str, url: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
            let response = client
                .get(url)
                .send()
                .await
                .map_err(|e| format!("the authorization page could not be fetched: {e}"))?;
            // The callback itself answers (200, or 400 for a refusal); what the server
            // said is what the callback listener reports.
            let _ = response.bytes().await;
            Ok(())
        })
    }
}
