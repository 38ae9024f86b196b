//! Turns run on their own: a client whose stream breaks reattaches at
//! `GET /v1/turns/{id}/events` (by `Last-Event-ID` or `?after=`) and receives exactly the
//! events it missed, then the live ones. A hundred turns, each watcher dropped at random
//! points and reattached (on the other instance, with two on one PostgreSQL): every turn
//! completes once and every client sees every event once, in order.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use buddy_core::{
    BoxFuture, CompletionRequest, Message, Provider, ProviderError, TokenStream, ToolCall,
    ToolOutcome,
};
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_server::{ApiKey, AppState, Backend, BackendError, Resolved, ServerSettings, app};
use buddy_store::{PgStore, SqliteStore};
use buddy_testkit::{ReplyProvider, TestTool, TestToolbox, reply_tokens};
use futures::StreamExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::post;
use super::sharing::{ALICE, BOB};

/// Tool rounds each turn makes before it answers.
const ROUNDS: usize = 4;

/// A model that takes a little while per call (so turns are mid-way when their watchers
/// drop), says what step it is on, calls `lookup` `ROUNDS` times, then answers.
struct Slow {
    inner: ReplyProvider,
}

impl Provider for Slow {
    fn name(&self) -> &str {
        "slow"
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(15)).await;
            self.inner.stream(request).await
        })
    }
}

struct SlowBackend;

impl Backend for SlowBackend {
    fn models(&self) -> Vec<String> {
        vec!["slow".into()]
    }

    fn resolve(&self, _: Option<&str>, _: Option<&str>) -> Result<Resolved, BackendError> {
        let provider = ReplyProvider::new(|request, _| {
            let rounds = request
                .messages
                .iter()
                .filter(|m| matches!(m, Message::Tool { .. }))
                .count();
            Ok(match rounds {
                n if n < ROUNDS => reply_tokens(
                    &format!("Step {n}. "),
                    vec![ToolCall::new(
                        format!("call_{n}"),
                        "lookup",
                        format!("{{\"page\": {n}}}"),
                    )],
                ),
                _ => reply_tokens("All found.", vec![]),
            })
        });
        Ok(Resolved {
            provider: Arc::new(Slow { inner: provider }),
            toolbox: Arc::new(TestToolbox::new().with(
                "lookup",
                TestTool::new(|call, _| {
                    ToolOutcome::ok(format!("page {}: 42 rows", call.arguments.as_str()))
                }),
            )),
            model: "slow".into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

fn settings() -> ServerSettings {
    ServerSettings {
        api_keys: vec![
            ApiKey::new(ALICE, None, false),
            ApiKey::new(BOB, Some("bob"), false),
        ],
        max_concurrent_turns_per_key: 200,
        ..ServerSettings::default()
    }
}

fn sqlite() -> AppState {
    AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(SlowBackend),
        PolicyConfig::default(),
        settings(),
    )
}

async fn postgres() -> AppState {
    let url = std::env::var("BUDDY_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!("BUDDY_TEST_POSTGRES_URL is not set: run the suite with scripts/test.sh")
    });
    let store = PgStore::connect(&url).await.unwrap();
    AppState::shared(
        Arc::new(store.clone()),
        Arc::new(store),
        Arc::new(SlowBackend),
        PolicyConfig::default(),
        settings(),
    )
}

/// A tiny deterministic generator, so a failing run can be repeated.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// One SSE frame: its number (when it has one), name and data.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Frame {
    pub(super) id: Option<u64>,
    pub(super) name: String,
    pub(super) data: Value,
}

pub(super) fn parse(block: &str) -> Option<Frame> {
    let mut frame = Frame {
        id: None,
        name: "message".into(),
        data: Value::Null,
    };
    let mut data = String::new();
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("id: ") {
            frame.id = v.parse().ok();
        } else if let Some(v) = line.strip_prefix("event: ") {
            frame.name = v.to_owned();
        } else if let Some(v) = line.strip_prefix("data: ") {
            data.push_str(v);
        }
    }
    if data.is_empty() {
        return None;
    }
    frame.data = serde_json::from_str(&data).unwrap_or(Value::String(data));
    Some(frame)
}

/// Reads frames of `body` until `stop_after` of them (`None`: to the end), then drops
/// the rest of the connection unread.
async fn read_frames(body: Body, stop_after: Option<usize>) -> Vec<Frame> {
    let mut stream = body.into_data_stream();
    let mut buffer = String::new();
    let mut frames = Vec::new();
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            if let Some(frame) = parse(&block) {
                frames.push(frame);
                if stop_after.is_some_and(|n| frames.len() >= n) {
                    return frames;
                }
            }
        }
        let chunk = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("no event within 30 s");
        match chunk {
            Some(Ok(bytes)) => buffer.push_str(&String::from_utf8_lossy(&bytes)),
            _ => return frames,
        }
    }
}

pub(super) async fn open(state: &AppState, request: Request<Body>) -> (StatusCode, Body) {
    let response = app(state.clone()).oneshot(request).await.unwrap();
    (response.status(), response.into_body())
}

pub(super) fn watch_request(turn: &str, after: u64, by_header: bool, key: &str) -> Request<Body> {
    let mut builder = Request::get(match by_header {
        true => format!("/v1/turns/{turn}/events"),
        false => format!("/v1/turns/{turn}/events?after={after}"),
    })
    .header("authorization", format!("Bearer {key}"));
    if by_header {
        builder = builder.header("last-event-id", after.to_string());
    }
    builder.body(Body::empty()).unwrap()
}

/// One client: starts a turn at `start`, drops its stream after a random number of
/// events, reattaches at a random instance of `all` (and drops again, at random, up to
/// three times), and returns its conversation, turn and every numbered event it saw.
async fn client(start: AppState, all: Vec<AppState>, seed: u64) -> (String, String, Vec<Frame>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let (status, body) = open(
        &start,
        post("/v1/chat", json!({"message": "find it"}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let cut = 1 + rng.below(12) as usize;
    let mut frames = read_frames(body, Some(cut)).await;
    let opening = frames.remove(0);
    assert_eq!(opening.name, "conversation");
    let conversation = opening.data["conversation_id"].as_str().unwrap().to_owned();
    let turn = opening.data["turn_id"].as_str().unwrap().to_owned();
    let mut seen = frames;
    for attempt in 0.. {
        if seen
            .last()
            .is_some_and(|f| f.name == "done" || f.name == "error")
        {
            break;
        }
        let after = seen.last().and_then(|f| f.id).unwrap_or(0);
        let at = &all[rng.below(all.len() as u64) as usize];
        let (status, body) = open(at, watch_request(&turn, after, rng.below(2) == 0, ALICE)).await;
        assert_eq!(status, StatusCode::OK, "reattach {attempt} of {turn}");
        let stop = (attempt < 3 && rng.below(2) == 0).then(|| 1 + rng.below(6) as usize);
        seen.extend(read_frames(body, stop).await);
    }
    (conversation, turn, seen)
}

/// Runs 100 dropped-and-reattached clients, turns started on `starts` in turn and
/// watched from any of `all`, and checks what each saw.
async fn hundred_clients(starts: &[AppState], all: &[AppState]) {
    let clients: Vec<_> = (0..100u64)
        .map(|i| {
            let start = starts[i as usize % starts.len()].clone();
            tokio::spawn(client(start, all.to_vec(), i + 1))
        })
        .collect();
    for handle in clients {
        let (conversation, turn, seen) = handle.await.unwrap();
        // Each event once, in order, numbered from 1 with none missing.
        let ids: Vec<u64> = seen.iter().map(|f| f.id.expect("numbered")).collect();
        let expected: Vec<u64> = (1..=ids.len() as u64).collect();
        assert_eq!(ids, expected, "{turn}: {seen:?}");
        assert_eq!(seen.last().unwrap().name, "done", "{turn}");
        assert_eq!(seen.last().unwrap().data["reason"], "completed");
        let calls = seen.iter().filter(|f| f.name == "tool_call_start").count();
        assert_eq!(calls, ROUNDS, "{turn}");
        // Exactly the turn's whole log: a watcher from the start sees the same.
        let (status, body) = open(&all[0], watch_request(&turn, 0, false, ALICE)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(read_frames(body, None).await, seen, "{turn}");
        // The turn ran once and completed.
        let response = app(all[0].clone())
            .oneshot(super::sharing::get(
                &format!("/v1/conversations/{conversation}"),
                ALICE,
            ))
            .await
            .unwrap();
        let detail = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let detail: Value = serde_json::from_slice(&detail).unwrap();
        let turns = detail["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 1, "{detail}");
        assert_eq!(turns[0]["stop_reason"], "completed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_dropped_watchers_reattach_and_see_every_event_once_in_order_on_sqlite() {
    let state = sqlite();
    hundred_clients(std::slice::from_ref(&state), std::slice::from_ref(&state)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_dropped_watchers_reattach_through_either_of_two_postgres_instances() {
    let (a, b) = (postgres().await, postgres().await);
    hundred_clients(&[a.clone(), b.clone()], &[a, b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_is_watched_only_by_its_key_and_a_bad_position_is_a_clear_error() {
    let state = sqlite();
    let (status, body) = open(
        &state,
        post("/v1/chat", json!({"message": "find it"}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let frames = read_frames(body, Some(1)).await;
    let turn = frames[0].data["turn_id"].as_str().unwrap().to_owned();
    // Another key is told it does not exist, as for a turn that never was.
    let (status, _) = open(&state, watch_request(&turn, 0, false, BOB)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = open(&state, watch_request("turn_nothing", 0, false, ALICE)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = open(
        &state,
        Request::get(format!("/v1/turns/{turn}/events?after=soon"))
            .header("authorization", format!("Bearer {ALICE}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let body = axum::body::to_bytes(body, 1 << 16).await.unwrap();
    assert!(String::from_utf8_lossy(&body).contains("event number"));
    // The dropped turn ran to its end anyway.
    let (_, body) = open(&state, watch_request(&turn, 0, true, ALICE)).await;
    let all = read_frames(body, None).await;
    assert_eq!(all.last().unwrap().data["reason"], "completed");
    // Explicit cancel still stops a running turn.
    let (_, body) = open(
        &state,
        post("/v1/chat", json!({"message": "find it"}), Some(ALICE)),
    )
    .await;
    let first = read_frames(body, Some(1)).await;
    let turn = first[0].data["turn_id"].as_str().unwrap().to_owned();
    let (status, _) = open(
        &state,
        post(&format!("/v1/turns/{turn}/cancel"), json!({}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, body) = open(&state, watch_request(&turn, 0, false, ALICE)).await;
    let all = read_frames(body, None).await;
    assert_eq!(all.last().unwrap().data["reason"], "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_response_runs_on_its_own_and_its_stream_resumes_after_a_sequence_number() {
    let state = sqlite();
    let (status, body) = open(
        &state,
        post(
            "/v1/responses",
            json!({"model": "slow", "input": "find it", "background": true}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let created: Value =
        serde_json::from_slice(&axum::body::to_bytes(body, 1 << 20).await.unwrap()).unwrap();
    assert_eq!(created["status"], "in_progress");
    assert_eq!(created["background"], true);
    let id = created["id"].as_str().unwrap().to_owned();
    let get = |uri: String| {
        Request::get(uri)
            .header("authorization", format!("Bearer {ALICE}"))
            .body(Body::empty())
            .unwrap()
    };
    // The whole stream from the start, then from after sequence number 3.
    let (status, body) = open(&state, get(format!("/v1/responses/{id}?stream=true"))).await;
    assert_eq!(status, StatusCode::OK);
    let whole = read_frames(body, None).await;
    let numbers: Vec<u64> = whole
        .iter()
        .filter_map(|f| f.data["sequence_number"].as_u64())
        .collect();
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
    assert_eq!(whole[0].name, "response.created");
    assert_eq!(whole[whole.len() - 2].name, "response.completed");
    assert_eq!(whole.last().unwrap().data, "[DONE]");
    let (_, body) = open(
        &state,
        get(format!("/v1/responses/{id}?stream=true&starting_after=3")),
    )
    .await;
    let rest = read_frames(body, None).await;
    assert_eq!(rest[..], whole[4..]);
    // Retrieved once it has ended: completed, with its answer.
    let (_, body) = open(&state, get(format!("/v1/responses/{id}"))).await;
    let done: Value =
        serde_json::from_slice(&axum::body::to_bytes(body, 1 << 20).await.unwrap()).unwrap();
    assert_eq!(done["status"], "completed", "{done}");
    // Another key finds nothing; `store: false` cannot run in the background.
    let (status, _) = open(
        &state,
        Request::get(format!("/v1/responses/{id}?stream=true"))
            .header("authorization", format!("Bearer {BOB}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = open(
        &state,
        post(
            "/v1/responses",
            json!({"model": "slow", "input": "x", "background": true, "store": false}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// `GET uri` as Alice.
fn alice_get(uri: String) -> Request<Body> {
    Request::get(uri)
        .header("authorization", format!("Bearer {ALICE}"))
        .body(Body::empty())
        .unwrap()
}

async fn json_of(state: &AppState, request: Request<Body>) -> (StatusCode, Value) {
    let (status, body) = open(state, request).await;
    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_background_response_reads_back_cancelled() {
    let state = sqlite();
    let (_, created) = json_of(
        &state,
        post(
            "/v1/responses",
            json!({"model": "slow", "input": "find it", "background": true}),
            Some(ALICE),
        ),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let cancel = post(
        &format!("/v1/responses/{id}/cancel"),
        json!({}),
        Some(ALICE),
    );
    let (status, cancelled) = json_of(&state, cancel).await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled");
    // Every later read says so, once the turn has ended.
    let mut read = Value::Null;
    for _ in 0..200 {
        read = json_of(&state, alice_get(format!("/v1/responses/{id}")))
            .await
            .1;
        if read["status"] != "in_progress" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(read["status"], "cancelled", "{read}");
    let (_, again) = json_of(&state, alice_get(format!("/v1/responses/{id}"))).await;
    assert_eq!(again["status"], "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_that_was_not_streamed_streams_on_retrieve() {
    let state = sqlite();
    let (status, whole) = json_of(
        &state,
        post(
            "/v1/responses",
            json!({"model": "slow", "input": "find it"}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{whole}");
    let id = whole["id"].as_str().unwrap().to_owned();
    let (status, body) = open(&state, alice_get(format!("/v1/responses/{id}?stream=true"))).await;
    assert_eq!(status, StatusCode::OK);
    let frames = read_frames(body, None).await;
    let numbers: Vec<u64> = frames
        .iter()
        .filter_map(|f| f.data["sequence_number"].as_u64())
        .collect();
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
    assert_eq!(frames[0].name, "response.created");
    let completed = &frames[frames.len() - 2];
    assert_eq!(completed.name, "response.completed");
    assert_eq!(completed.data["response"]["output"], whole["output"]);
    assert_eq!(frames.last().unwrap().data, "[DONE]");
    let (_, body) = open(
        &state,
        alice_get(format!("/v1/responses/{id}?stream=true&starting_after=3")),
    )
    .await;
    assert_eq!(read_frames(body, None).await[..], frames[4..]);
}
