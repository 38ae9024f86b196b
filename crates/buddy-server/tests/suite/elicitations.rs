//! A tool's question for the person (MCP elicitation) on `buddy serve`: the native
//! stream shows `elicitation_required`, `POST /v1/turns/{id}/elicitations/{eid}`
//! answers it (404 unknown, 409 answered, 400 content that does not fit, naming the
//! field; only the turn's own caller; accept, decline and cancel reach the tool), a reattached client sees the open question, and
//! the OpenAI facades are unattended (the policy declines).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use buddy_core::{
    BoxFuture, ElicitationRequest, Message, RepeatSemantics, SkillContext, ToolCall, ToolOutcome,
    ToolSpec, Toolbox,
};
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_server::{ApiKey, AppState, Backend, BackendError, Resolved, ServerSettings};
use buddy_store::SqliteStore;
use buddy_testkit::{ReplyProvider, reply_tokens};
use futures::StreamExt;
use serde_json::{Value, json};

use super::post;
use super::reattach::{Frame, open, parse, watch_request};
use super::sharing::{ALICE, BOB};

/// `signup` asks the person twice (a name, then again to confirm) and returns the
/// answers as they came back.
struct Asking {
    specs: Vec<ToolSpec>,
}

impl Toolbox for Asking {
    fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }
    fn semantics(&self, _: &str) -> Option<RepeatSemantics> {
        Some(RepeatSemantics::Effectful)
    }
    fn invoke<'a>(&'a self, _: &'a ToolCall, ctx: SkillContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let Some(elicitor) = ctx.elicitor else {
                return ToolOutcome::error("no elicitor");
            };
            let mut answers = Vec::new();
            for message in ["Who signs up?", "Sure?"] {
                let answer = elicitor
                    .ask(ElicitationRequest {
                        server: "signup".into(),
                        message: message.into(),
                        schema: json!({"type": "object",
                            "properties": {"name": {"type": "string", "title": "Name"}},
                            "required": ["name"]}),
                        order: vec!["name".into()],
                    })
                    .await;
                answers.push(answer);
            }
            ToolOutcome::ok(serde_json::to_string(&answers).unwrap_or_default())
        })
    }
}

pub(super) struct AskingBackend;

impl Backend for AskingBackend {
    fn models(&self) -> Vec<String> {
        vec!["m".into()]
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        let provider = ReplyProvider::new(|request, _| {
            let result = request.messages.iter().find_map(|m| match m {
                Message::Tool { content, .. } => Some(content.clone()),
                _ => None,
            });
            Ok(match result {
                Some(result) => reply_tokens(&format!("Signed up: {result}"), vec![]),
                None => reply_tokens("", vec![ToolCall::new("c1", "signup", "{}")]),
            })
        });
        Ok(Resolved {
            provider: Arc::new(provider),
            toolbox: Arc::new(Asking {
                specs: vec![ToolSpec {
                    name: "signup".into(),
                    description: "Signs the person up.".into(),
                    parameters: json!({"type": "object", "properties": {}}),
                }],
            }),
            model: "m".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

fn state() -> AppState {
    AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(AskingBackend),
        PolicyConfig::default(),
        ServerSettings {
            api_keys: vec![
                ApiKey::new(ALICE, None, false),
                ApiKey::new(BOB, Some("bob"), false),
            ],
            ..ServerSettings::default()
        },
    )
}

/// Frames of a stream, read until one named `until` (included) or the end.
pub(super) struct Frames {
    stream: axum::body::BodyDataStream,
    buffer: String,
}

impl Frames {
    pub(super) fn new(body: Body) -> Self {
        Frames {
            stream: body.into_data_stream(),
            buffer: String::new(),
        }
    }

    pub(super) async fn until(&mut self, until: Option<&str>) -> Vec<Frame> {
        let mut frames = Vec::new();
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(frame) = parse(&block) {
                    let stop = until == Some(frame.name.as_str());
                    frames.push(frame);
                    if stop {
                        return frames;
                    }
                }
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.stream.next())
                .await
                .expect("no event within 30 s");
            match chunk {
                Some(Ok(bytes)) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return frames,
            }
        }
    }
}

pub(super) async fn answer(
    state: &AppState,
    turn: &str,
    id: &str,
    body: Value,
    key: &str,
) -> (StatusCode, Value) {
    let (status, body) = open(
        state,
        post(
            &format!("/v1/turns/{turn}/elicitations/{id}"),
            body,
            Some(key),
        ),
    )
    .await;
    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn the_stream_shows_the_question_and_the_route_answers_it() {
    let state = state();
    let (status, body) = open(
        &state,
        post("/v1/chat", json!({"message": "sign me up"}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let mut stream = Frames::new(body);
    let frames = stream.until(Some("elicitation_required")).await;
    let turn = frames[0].data["turn_id"].as_str().unwrap().to_owned();
    let asked = frames.last().unwrap();
    assert_eq!(asked.name, "elicitation_required");
    let id = asked.data["id"].as_str().unwrap().to_owned();
    assert_eq!(asked.data["call_id"], "c1");
    assert_eq!(asked.data["server"], "signup");
    assert_eq!(asked.data["message"], "Who signs up?");
    assert_eq!(asked.data["schema"]["required"], json!(["name"]));

    // A client that reattaches sees the question still open.
    let (_, watched) = open(&state, watch_request(&turn, 0, false, ALICE)).await;
    let seen = Frames::new(watched)
        .until(Some("elicitation_required"))
        .await;
    assert_eq!(seen.last().unwrap().data["id"], json!(id));

    // Someone else's key cannot answer; unknown questions and bad content are refused.
    let (status, _) = answer(&state, &turn, &id, json!({"action": "decline"}), BOB).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = answer(
        &state,
        &turn,
        "elicit_9",
        json!({"action": "decline"}),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, error) = answer(
        &state,
        &turn,
        &id,
        json!({"action": "accept", "content": {"name": 42}}),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("field `name`: must be a text"), "{error}");
    let (status, _) = answer(&state, &turn, &id, json!({"action": "maybe"}), ALICE).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let (status, taken) = answer(
        &state,
        &turn,
        &id,
        json!({"action": "accept", "content": {"name": "Ada"}}),
        ALICE,
    )
    .await;
    assert_eq!(
        (status, taken["action"].clone()),
        (StatusCode::OK, json!("accept"))
    );
    // The tool asks again; the first question, answered, is a conflict now.
    let next = stream.until(Some("elicitation_required")).await;
    let resolved = next
        .iter()
        .find(|f| f.name == "elicitation_resolved")
        .expect("resolved");
    assert_eq!(
        (resolved.data["id"].clone(), resolved.data["action"].clone()),
        (json!(id), json!("accept"))
    );
    let second = next.last().unwrap().data["id"].as_str().unwrap().to_owned();
    assert_ne!(second, id);
    let (status, _) = answer(&state, &turn, &id, json!({"action": "decline"}), ALICE).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _) = answer(&state, &turn, &second, json!({"action": "decline"}), ALICE).await;
    assert_eq!(status, StatusCode::OK);
    let rest = stream.until(None).await;
    let result = rest
        .iter()
        .find(|f| f.name == "tool_call_result")
        .expect("a tool result");
    assert_eq!(
        result.data["content"],
        r#"[{"action":"accept","content":{"name":"Ada"}},{"action":"decline"}]"#
    );
    let done = rest.last().unwrap();
    assert_eq!(done.name, "done");
    assert!(
        done.data["answer"]
            .as_str()
            .unwrap_or_default()
            .contains("Ada")
    );

    let (status, _) = answer(&state, &turn, &id, json!({"action": "decline"}), ALICE).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the turn has ended");
}

#[tokio::test]
async fn cancel_reaches_the_tool() {
    let state = state();
    let (_, body) = open(
        &state,
        post("/v1/chat", json!({"message": "sign me up"}), Some(ALICE)),
    )
    .await;
    let mut stream = Frames::new(body);
    let mut frames = stream.until(Some("elicitation_required")).await;
    let turn = frames[0].data["turn_id"].as_str().unwrap().to_owned();
    for round in 0..2 {
        if round > 0 {
            frames = stream.until(Some("elicitation_required")).await;
        }
        let id = frames.last().unwrap().data["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let (status, _) = answer(&state, &turn, &id, json!({"action": "cancel"}), ALICE).await;
        assert_eq!(status, StatusCode::OK);
    }
    let rest = stream.until(None).await;
    let result = rest
        .iter()
        .find(|f| f.name == "tool_call_result")
        .expect("a tool result");
    assert_eq!(
        result.data["content"],
        r#"[{"action":"cancel"},{"action":"cancel"}]"#
    );
}

#[tokio::test]
async fn the_openai_facade_is_unattended_and_declines() {
    let state = state();
    let (status, body) = open(
        &state,
        post(
            "/v1/chat/completions",
            json!({"model": "m", "messages": [{"role": "user", "content": "sign me up"}]}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let reply: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        reply["choices"][0]["message"]["content"],
        r#"Signed up: [{"action":"decline"},{"action":"decline"}]"#
    );
}
