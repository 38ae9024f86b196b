//! The contract test (issue 44): every body and stream event buddy's OpenAI endpoints
//! send, validated against OpenAI's published OpenAPI description (pinned; installed by
//! `scripts/openai-openapi.sh`, validated by `scripts/openapi_validate.py`). A body that
//! fails its schema is either listed in `deviations.rs`, or fails this test; so does a
//! listed deviation that no longer happens.

mod deviations;
mod drive;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use buddy_core::{Message, ProviderError, Token, ToolCall, ToolOutcome};
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_server::{ApiKey, AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::SqliteStore;
use buddy_testkit::{ReplyProvider, TestTool, TestToolbox, reply_tokens};
use serde_json::{Value, json};

use super::send;

const KEY: &str = "sk-contract-AAAAAAAA";

/// The models the contract is driven with, each one behaviour of a real model.
struct Models;

/// A model that begins its answer and never ends it: its turn stays in progress until it
/// is cancelled (and its response keeps the partial message).
struct Held;

impl buddy_core::Provider for Held {
    fn name(&self) -> &str {
        "held"
    }

    fn stream<'a>(
        &'a self,
        _: buddy_core::CompletionRequest<'a>,
    ) -> buddy_core::BoxFuture<'a, Result<buddy_core::TokenStream, ProviderError>> {
        use futures::StreamExt;
        Box::pin(async {
            let begun = futures::stream::iter([Ok(Token::Text {
                text: "Let me think".into(),
            })]);
            Ok(begun.chain(futures::stream::pending()).boxed())
        })
    }
}

const MODELS: [&str; 6] = [
    "server-tool",
    "client-tool",
    "refusal",
    "summary",
    "held",
    "broken",
];

impl Backend for Models {
    fn models(&self) -> Vec<String> {
        MODELS.iter().map(|m| (*m).to_owned()).collect()
    }

    fn resolve(&self, _: Option<&str>, model: Option<&str>) -> Result<Resolved, BackendError> {
        let model = model.unwrap_or("server-tool").to_owned();
        let provider: Arc<dyn buddy_core::Provider> = match model.as_str() {
            // Thinks, calls the server's `lookup`, then answers.
            "server-tool" => Arc::new(ReplyProvider::new(|request, _| {
                Ok(match request.messages.last() {
                    Some(Message::Tool { .. }) => reply_tokens("Found it: 42.", vec![]),
                    _ => {
                        let mut tokens = vec![Ok(Token::Reasoning {
                            text: "The lookup skill knows.".into(),
                        })];
                        let call = ToolCall::new("call_1", "lookup", r#"{"q":"answer"}"#);
                        tokens.extend(reply_tokens("", vec![call]));
                        tokens
                    }
                })
            })),
            // Calls the client's `get_weather` when offered, else answers.
            "client-tool" => Arc::new(ReplyProvider::new(|request, n| {
                let offered = request
                    .tools
                    .is_some_and(|t| t.iter().any(|t| t.name == "get_weather"));
                let answered = matches!(request.messages.last(), Some(Message::Tool { .. }));
                Ok(if offered && !answered {
                    let call =
                        ToolCall::new(format!("call_w{n}"), "get_weather", r#"{"city":"Paris"}"#);
                    reply_tokens("Let me check.", vec![call])
                } else {
                    reply_tokens("Sunny in Paris.", vec![])
                })
            })),
            "refusal" => Arc::new(ReplyProvider::new(|_, _| {
                let mut tokens = vec![Ok(Token::Refusal {
                    text: "I cannot help with that.".into(),
                })];
                tokens.extend(reply_tokens("", vec![]));
                Ok(tokens)
            })),
            "summary" => Arc::new(ReplyProvider::new(|_, _| {
                Ok(reply_tokens("We launch on Tuesday.", vec![]))
            })),
            "held" => Arc::new(Held),
            "broken" => Arc::new(ReplyProvider::new(|_, _| {
                Err(ProviderError::Stream {
                    provider: "broken".into(),
                    url: "http://127.0.0.1:9/v1".into(),
                    message: "the model server broke off".into(),
                    retryable: false,
                })
            })),
            other => return Err(BackendError(format!("unknown model `{other}`"))),
        };
        Ok(Resolved {
            provider,
            toolbox: Arc::new(
                TestToolbox::new().with("lookup", TestTool::new(|_, _| ToolOutcome::ok("42"))),
            ),
            model,
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

/// Which schema a body must match: the one an operation's 200 answer names for a media
/// type (the spec's own mapping), or a named component (errors, replayed events).
#[derive(Clone)]
enum Target {
    Operation(String),
    Stream(String),
    Schema(&'static str),
}

/// One body or event, where it came from, and what it must match.
struct Sample {
    label: String,
    target: Target,
    body: Value,
}

/// Drives the router and keeps every body and event it answers with.
struct Recorder {
    state: AppState,
    samples: Vec<Sample>,
}

/// A request of `method` to `uri`, with a JSON `body` and, when `key`, the API key.
fn request(method: &str, uri: &str, body: Option<Value>, key: bool) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(uri);
    if key {
        builder = builder.header("authorization", format!("Bearer {KEY}"));
    }
    match body {
        Some(body) => builder
            .header("content-type", "application/json")
            .body(Body::from(body.to_string())),
        None => builder.body(Body::empty()),
    }
    .unwrap()
}

/// `POST /v1/responses/{response_id}` → the spec's `POST /responses/{response_id}`.
fn spec_operation(operation: &str) -> String {
    let (method, path) = operation.split_once(' ').unwrap();
    format!("{method} {}", path.strip_prefix("/v1").unwrap())
}

impl Recorder {
    fn new() -> Self {
        let state = AppState::new(
            Arc::new(SqliteStore::in_memory().unwrap()),
            Arc::new(Models),
            PolicyConfig::default(),
            ServerSettings {
                api_keys: vec![ApiKey::new(KEY, None, false)],
                ..ServerSettings::default()
            },
        );
        Recorder {
            state,
            samples: Vec::new(),
        }
    }

    fn keep(&mut self, label: String, target: Target, body: Value) {
        self.samples.push(Sample {
            label,
            target,
            body,
        });
    }

    /// `operation` ("GET /v1/models") at `uri`: a whole JSON answer, kept as its 200
    /// schema's sample or, on an error status, as an `ErrorResponse` (the error object
    /// OpenAI's API sends and its SDKs read, whatever status).
    async fn whole(
        &mut self,
        operation: &'static str,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.whole_with(
            operation,
            request(operation_method(operation), uri, body, true),
        )
        .await
    }

    async fn whole_with(
        &mut self,
        operation: &'static str,
        request: Request<Body>,
    ) -> (StatusCode, Value) {
        let (status, text) = send(&self.state, request).await;
        let body: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{operation}: not JSON ({e}): {text}"));
        if status == StatusCode::OK {
            self.keep(
                operation.to_owned(),
                Target::Operation(spec_operation(operation)),
                body.clone(),
            );
        } else {
            self.keep(
                format!("{operation} {}", status.as_u16()),
                Target::Schema("ErrorResponse"),
                body.clone(),
            );
        }
        (status, body)
    }

    /// `operation` streamed: every `data:` event is kept, by its `type` (Responses) or as a
    /// chunk (Chat Completions); an `{"error": …}` event as an `ErrorResponse`. `events`
    /// are checked against the operation's `text/event-stream` schema, or `replayed`.
    async fn streamed(
        &mut self,
        operation: &'static str,
        uri: &str,
        body: Option<Value>,
        replayed: Option<&'static str>,
    ) -> Vec<Value> {
        let request = request(operation_method(operation), uri, body, true);
        let (status, text) = send(&self.state, request).await;
        assert_eq!(status, StatusCode::OK, "{operation}: {text}");
        let mut events = Vec::new();
        let mut done = false;
        for line in text.lines() {
            let Some(data) = line.strip_prefix("data: ") else {
                continue;
            };
            assert!(!done, "{operation}: an event after [DONE]: {text}");
            if data == "[DONE]" {
                done = true;
                continue;
            }
            let event: Value = serde_json::from_str(data)
                .unwrap_or_else(|e| panic!("{operation}: an event is not JSON ({e}): {data}"));
            let (label, target) = match (event["type"].as_str(), event.get("object")) {
                (Some(kind), _) => (
                    format!("{operation} event {kind}"),
                    match replayed {
                        Some(schema) => Target::Schema(schema),
                        None => Target::Stream(spec_operation(operation)),
                    },
                ),
                (None, None) if event.get("error").is_some() => (
                    format!("{operation} event error"),
                    Target::Schema("ErrorResponse"),
                ),
                _ => (
                    format!("{operation} event chunk"),
                    Target::Stream(spec_operation(operation)),
                ),
            };
            self.keep(label, target, event.clone());
            events.push(event);
        }
        assert!(!events.is_empty(), "{operation}: no event: {text}");
        events
    }
}

fn operation_method(operation: &str) -> &str {
    operation.split_once(' ').unwrap().0
}

/// One deviation: where (the sample's label and the field's JSON pointer, indices as `*`)
/// and what the schema says.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Deviation {
    label: String,
    pointer: String,
    reason: String,
}

/// The validator's verdicts: the spec's version, and each deviation with one example
/// message.
fn validate(samples: &[Sample]) -> (String, BTreeMap<Deviation, String>) {
    let python = std::env::var("BUDDY_OPENAPI_PYTHON").unwrap_or_else(|_| {
        panic!("BUDDY_OPENAPI_PYTHON is not set: run with scripts/test.sh (or eval \"$(bash scripts/openai-openapi.sh)\"), which installs OpenAI's OpenAPI description and the validator")
    });
    let spec = std::env::var("BUDDY_OPENAI_SPEC").unwrap_or_else(|_| {
        panic!("BUDDY_OPENAI_SPEC is not set: run with scripts/test.sh (or eval \"$(bash scripts/openai-openapi.sh)\")")
    });
    let batch: Vec<Value> = samples
        .iter()
        .map(|s| {
            let mut sample = json!({"label": s.label, "body": s.body});
            match &s.target {
                Target::Operation(op) => {
                    sample["operation"] = json!(op);
                    sample["media"] = json!("application/json");
                }
                Target::Stream(op) => {
                    sample["operation"] = json!(op);
                    sample["media"] = json!("text/event-stream");
                }
                Target::Schema(name) => sample["schema"] = json!(name),
            }
            sample
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("samples.json");
    std::fs::write(&file, serde_json::to_vec(&batch).unwrap()).unwrap();
    // To look at the bodies, or run the validator by hand on them.
    if let Ok(keep) = std::env::var("BUDDY_CONTRACT_SAMPLES") {
        std::fs::copy(&file, &keep).unwrap_or_else(|e| panic!("cannot write {keep}: {e}"));
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/openapi_validate.py"
    );
    let output = std::process::Command::new(&python)
        .arg(script)
        .arg(&spec)
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the validator failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    let version = format!(
        "{} {}",
        answer["spec"]["title"].as_str().unwrap_or("?"),
        answer["spec"]["version"].as_str().unwrap_or("?")
    );
    let mut found = BTreeMap::new();
    for result in answer["results"].as_array().unwrap() {
        for error in result["errors"].as_array().unwrap() {
            let deviation = Deviation {
                label: result["label"].as_str().unwrap().to_owned(),
                pointer: error["pointer"].as_str().unwrap().to_owned(),
                reason: error["reason"].as_str().unwrap().to_owned(),
            };
            let example = format!(
                "{} ({})",
                error["detail"].as_str().unwrap_or(""),
                result["schema"].as_str().unwrap_or("?")
            );
            found.entry(deviation).or_insert(example);
        }
    }
    (version, found)
}

/// Whether `text` matches `pattern`, where `*` stands for any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            text.starts_with(head)
                && (0..=text.len() - head.len()).any(|i| {
                    text.is_char_boundary(head.len() + i) && glob(rest, &text[head.len() + i..])
                })
        }
    }
}

fn listed(known: &(&str, &str, &str), found: &Deviation) -> bool {
    glob(known.0, &found.label) && glob(known.1, &found.pointer) && glob(known.2, &found.reason)
}

#[test]
fn globs_match_as_the_deviation_list_means() {
    assert!(glob("*", ""));
    assert!(glob(
        "* event response.*",
        "POST /v1/responses event response.created"
    ));
    assert!(glob("*/user", "/response/user"));
    assert!(!glob("*/user", "/response/user_id"));
    assert!(glob(
        "required: *",
        "required: 'model' is a required property"
    ));
    assert!(!glob(
        "POST /v1/responses",
        "POST /v1/responses event error"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_body_and_event_matches_openais_openapi_description() {
    let started = std::time::Instant::now();
    let mut recorder = Recorder::new();
    drive::everything(&mut recorder).await;
    let events = recorder
        .samples
        .iter()
        .filter(|s| s.label.contains(" event "))
        .count();
    let bodies = recorder.samples.len() - events;
    let (version, found) = validate(&recorder.samples);
    let new: Vec<String> = found
        .iter()
        .filter(|(d, _)| !deviations::KNOWN.iter().any(|k| listed(k, d)))
        .map(|(d, example)| {
            format!(
                "    (\"{}\", \"{}\", \"{}\"),\n        // {example}",
                d.label,
                d.pointer,
                d.reason.replace('"', "\\\"")
            )
        })
        .collect();
    let gone: Vec<String> = deviations::KNOWN
        .iter()
        .filter(|k| !found.keys().any(|d| listed(k, d)))
        .map(|k| format!("    {k:?}"))
        .collect();
    println!(
        "contract: {bodies} bodies and {events} events validated against {version} in {:.1?}; \
         {} deviations found, all listed",
        started.elapsed(),
        found.len(),
    );
    assert!(
        new.is_empty() && gone.is_empty(),
        "against {version}:\n\nnew deviations (fix the server, or list them in contract/deviations.rs):\n{}\n\nlisted deviations that no longer occur (remove them from the list):\n{}",
        new.join("\n"),
        gone.join("\n")
    );
}
