//! Every route that reaches a model provider goes through the spend gate (issue 60, item
//! 1). Two checks that fail on a new path around it:
//!
//! * the routes the router declares (read from its source) must each be listed below,
//!   as spending or not; each spending one is driven for a key at its ceiling and must
//!   be refused (or, on the Messages facade, answered with the ceiling's final message)
//!   without the provider being called;
//! * in the server's source only the gate calls a provider, and only the turn runner
//!   (which takes the gate's `Admission`) builds an engine; provider wrappers forward.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::sharing::ALICE;
use super::spend_gate::server;
use super::{post, send};

/// Routes that call a model on the caller's key, with a body that would: (method, path).
const SPENDING: &[(&str, &str)] = &[
    ("POST", "/v1/chat"),
    ("POST", "/v1/conversations/{id}/resume"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/responses"),
    // The WebSocket of /v1/responses runs its turns through the same `Turns::start` as
    // POST (responses/ws.rs); it is not driven here (no socket), the source check holds it.
    ("GET", "/v1/responses"),
    ("POST", "/v1/responses/compact"),
    ("POST", "/v1/messages"),
];

/// Routes that never call a model.
const NOT_SPENDING: &[(&str, &str)] = &[
    ("GET", "/metrics"),
    ("GET", "/healthz"),
    ("GET", "/v1/health"),
    ("GET", "/v1/models"),
    ("GET", "/v1/conversations"),
    ("GET", "/v1/conversations/{id}"),
    ("PATCH", "/v1/conversations/{id}"),
    ("DELETE", "/v1/conversations/{id}"),
    ("POST", "/v1/conversations/{id}/replay"),
    ("POST", "/v1/conversations/{id}/fork"),
    ("POST", "/v1/turns/{id}/cancel"),
    ("GET", "/v1/turns/{id}/events"),
    ("POST", "/v1/turns/{id}/elicitations/{eid}"),
    ("POST", "/v1/messages/count_tokens"),
    ("GET", "/v1/responses/{id}"),
    ("DELETE", "/v1/responses/{id}"),
    ("GET", "/v1/responses/{id}/input_items"),
    ("POST", "/v1/responses/{id}/cancel"),
    ("POST", "/v1/conversations"),
    ("POST", "/v1/conversations/{id}"),
    ("GET", "/v1/conversations/{id}/items"),
    ("POST", "/v1/conversations/{id}/items"),
    ("GET", "/v1/conversations/{id}/items/{item_id}"),
    ("DELETE", "/v1/conversations/{id}/items/{item_id}"),
];

fn sources() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    assert!(out.len() > 20, "the server's sources were not found");
    out
}

/// The text of the call starting at `open` (an opening parenthesis) to its close.
fn call_text(text: &str, open: usize) -> &str {
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &text[open..open + i + 1];
                }
            }
            _ => {}
        }
    }
    &text[open..]
}

/// Every (method, path) the router's source declares with `.route("…", …)`; routes
/// whose path is not a literal are returned by file name.
fn declared_routes() -> (Vec<(String, String)>, Vec<String>) {
    let (mut routes, mut dynamic) = (Vec::new(), Vec::new());
    for (path, text) in sources() {
        for (at, _) in text.match_indices(".route(") {
            let call = call_text(&text, at + ".route".len());
            let inner = call[1..].trim_start();
            let Some(rest) = inner.strip_prefix('"') else {
                dynamic.push(path.file_name().unwrap().to_string_lossy().into_owned());
                continue;
            };
            let route = rest[..rest.find('"').unwrap()].to_owned();
            let handlers = &rest[rest.find('"').unwrap() + 1..];
            for method in ["get", "post", "patch", "delete", "put"] {
                let named = |m: &str| {
                    handlers.contains(&format!(" {m}("))
                        || handlers.contains(&format!(".{m}("))
                        || handlers.contains(&format!("\n{m}("))
                        || handlers.contains(&format!("({m}("))
                        || handlers
                            .trim_start_matches([',', ' ', '\n'])
                            .starts_with(&format!("{m}("))
                };
                if named(method) {
                    routes.push((method.to_uppercase(), route.clone()));
                }
            }
        }
    }
    routes.sort();
    routes.dedup();
    (routes, dynamic)
}

#[test]
fn every_route_of_the_router_is_listed_as_spending_or_not() {
    let (declared, dynamic) = declared_routes();
    let listed: Vec<(String, String)> = SPENDING
        .iter()
        .chain(NOT_SPENDING)
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    let unlisted: Vec<_> = declared.iter().filter(|r| !listed.contains(r)).collect();
    assert!(
        unlisted.is_empty(),
        "routes the spend-gate registry does not list (add each to SPENDING, with a body \
         that is driven under a spent ceiling, or to NOT_SPENDING): {unlisted:?}"
    );
    let gone: Vec<_> = listed.iter().filter(|r| !declared.contains(r)).collect();
    assert!(gone.is_empty(), "listed routes the router lacks: {gone:?}");
    // Only the static web pages are routed by a variable path.
    assert_eq!(
        dynamic,
        ["web.rs"],
        "routes with a computed path: {dynamic:?}"
    );
}

#[test]
fn only_the_gate_calls_a_provider_and_only_the_turn_runner_builds_an_engine() {
    let mut strays = Vec::new();
    for (path, text) in sources() {
        let file = path
            .strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        for (needle, allowed) in [
            // A one-off model call: only the gate's `Admission::call` makes one.
            (".complete(", &["gate.rs"][..]),
            // Provider wrappers forward their inner provider's stream; nothing else streams.
            (
                ".stream(",
                &[
                    "metrics.rs",
                    "messages/passthrough.rs",
                    "messages/tool_choice.rs",
                    "gate.rs",
                ][..],
            ),
            // An engine runs model calls: only the runner of an admitted turn builds one.
            ("Engine::new(", &["turn/run.rs"][..]),
        ] {
            let in_code = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .any(|l| l.contains(needle));
            if in_code && !allowed.contains(&file.as_str()) {
                strays.push(format!("{file}: {needle}"));
            }
        }
    }
    assert!(
        strays.is_empty(),
        "model calls outside the spend gate (crate::gate): {strays:?}"
    );
}

/// A body for `route` that would call the model.
fn body(route: &str) -> Value {
    match route {
        "/v1/chat" => json!({"message": "hi"}),
        "/v1/conversations/{id}/resume" => json!({"continue": true}),
        "/v1/chat/completions" => {
            json!({"model": "model-a", "messages": [{"role": "user", "content": "hi"}]})
        }
        "/v1/responses" | "/v1/responses/compact" => json!({"model": "model-a", "input": "hi"}),
        "/v1/messages" => json!({"model": "model-a", "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}]}),
        other => panic!("no body for {other}: add one"),
    }
}

#[tokio::test]
async fn every_spending_route_is_refused_for_a_key_at_its_ceiling_before_the_model_is_called() {
    let (state, seen, _) = server("at-ceiling", Some(0.0), None, |s| {
        s.prices
            .add(None, "*", buddy_core::Price::new(1_000.0, 2_000.0));
    });
    let (status, made) = send(&state, post("/v1/conversations", json!({}), Some(ALICE))).await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let conversation = serde_json::from_str::<Value>(&made).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for (method, route) in SPENDING.iter().filter(|(m, _)| *m == "POST") {
        let uri = route.replace("{id}", &conversation);
        let (status, text) = send(&state, post(&uri, body(route), Some(ALICE))).await;
        let refused = status == StatusCode::TOO_MANY_REQUESTS
            // The Messages and Responses facades end an agent's session with an ordinary
            // answer (Claude Code and codex retry a 429).
            || (status == StatusCode::OK && *route == "/v1/messages")
            || (status == StatusCode::OK
                && *route == "/v1/responses"
                && text.contains("\"stop_reason\":\"cost_budget\""));
        assert!(refused, "{method} {route}: {status} {text}");
        assert!(text.contains("ceiling"), "{method} {route}: {text}");
        assert_eq!(
            seen.calls.load(Ordering::SeqCst),
            0,
            "{method} {route} called the model past the gate"
        );
    }
}
