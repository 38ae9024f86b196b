//! The chat page at `/`: files embedded in the binary, served with a strict
//! Content-Security-Policy (only this origin's scripts, styles and API; no inline code).

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::state::AppState;

/// Nothing but this origin's own files and API; no inline script or style, no frames,
/// no forms posting elsewhere. Images only from here or `data:` (Markdown cannot load
/// a remote image that would tell a third party the page was read).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const INDEX: &str = include_str!("../web/index.html");
const APP: &str = include_str!("../web/app.js");
const STYLE: &str = include_str!("../web/style.css");
const MARKED: &str = include_str!("../web/vendor/marked.umd.js");
const PURIFY: &str = include_str!("../web/vendor/purify.min.js");
/// The tab's icon: a speech bubble, drawn (no image file to keep).
const FAVICON: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 32 32\">\
<rect x=\"3\" y=\"4\" width=\"26\" height=\"19\" rx=\"6\" fill=\"#0b5fcc\"/>\
<path d=\"M9 23l-2 6 8-6z\" fill=\"#0b5fcc\"/>\
<circle cx=\"11\" cy=\"13.5\" r=\"2\" fill=\"#fff\"/><circle cx=\"16\" cy=\"13.5\" r=\"2\" fill=\"#fff\"/>\
<circle cx=\"21\" cy=\"13.5\" r=\"2\" fill=\"#fff\"/></svg>";

fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The page's files: path, content type, body.
const FILES: [(&str, &str, &str); 7] = [
    ("/", "text/html; charset=utf-8", INDEX),
    ("/app.js", "text/javascript; charset=utf-8", APP),
    ("/style.css", "text/css; charset=utf-8", STYLE),
    (
        "/vendor/marked.umd.js",
        "text/javascript; charset=utf-8",
        MARKED,
    ),
    (
        "/vendor/purify.min.js",
        "text/javascript; charset=utf-8",
        PURIFY,
    ),
    ("/favicon.svg", "image/svg+xml", FAVICON),
    // Browsers ask for it unprompted; the same drawing answers.
    ("/favicon.ico", "image/svg+xml", FAVICON),
];

/// The page's routes; they need no key (the page asks for one).
pub(crate) fn routes() -> Router<AppState> {
    FILES
        .iter()
        .fold(Router::new(), |router, &(path, content_type, body)| {
            router.route(path, get(move || async move { file(content_type, body) }))
        })
}
