//! A server several people share: each key sees only its own conversations, quotas
//! are per key identity, the operator's policy is a ceiling, one turn at a time per
//! conversation, and a store that fails mid-turn loses nothing silently.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use buddy_core::{
    BoxFuture, CompletionRequest, Message, Provider, ProviderError, StopReason, TokenCount,
    TokenStream, ToolCall, ToolOutcome, TurnStats, Usd,
};
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_server::{
    ApiKey, AppState, Backend, BackendError, Resolved, ServerSettings, SpendCeiling, app,
};
use buddy_store::{
    ConversationDetail, ConversationInfo, ConversationSummary, Conversations, CountedHistory,
    Forks, History, Spend, SqliteStore, Store, StoreError, Tasks, TurnClosing, TurnOpening, Turns,
};
use buddy_testkit::{ReplyProvider, TestTool, TestToolbox, assert_history_valid, reply_tokens};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tower::ServiceExt;

use super::{post, send};

/// Permits of an open gate: more model calls than any test makes, and few enough for
/// `acquire_many` (a `u32`) to take them all and so close the gate.
pub(super) const OPEN_GATE: usize = 1 << 20;

pub(super) const ALICE: &str = "sk-live-AAAAAAAAAAAA";
pub(super) const BOB: &str = "sk-live-BBBBBBBBBBBB";
pub(super) const ADMIN: &str = "sk-admin-CCCCCCCCCC";

/// A model that calls `lookup` once, then answers; each model call first waits for a
/// permit of `gate` (so a test can hold a turn open as long as it likes).
struct Gated {
    gate: Arc<Semaphore>,
    inner: ReplyProvider,
}

impl Provider for Gated {
    fn name(&self) -> &str {
        "gated"
    }

    /// It takes every setting (the spend tests bound a call's output).
    fn unsupported(&self, _: &buddy_core::Sampling) -> Option<String> {
        None
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        Box::pin(async move {
            if let Ok(permit) = self.gate.acquire().await {
                permit.forget();
            }
            self.inner.stream(request).await
        })
    }
}

pub(super) struct TestBackend {
    pub(super) gate: Arc<Semaphore>,
}

impl Backend for TestBackend {
    fn models(&self) -> Vec<String> {
        vec!["model-a".into(), "model-b".into()]
    }

    fn resolve(&self, _: Option<&str>, model: Option<&str>) -> Result<Resolved, BackendError> {
        let model = model.unwrap_or("model-a").to_owned();
        if !self.models().contains(&model) {
            return Err(BackendError(format!("unknown model `{model}`")));
        }
        let provider = ReplyProvider::new(|request, _| {
            let answered = matches!(request.messages.last(), Some(Message::Tool { .. }));
            Ok(if answered {
                reply_tokens("Found it.", vec![])
            } else {
                let n = request.messages.len();
                reply_tokens("", vec![ToolCall::new(format!("call_{n}"), "lookup", "{}")])
            })
        });
        Ok(Resolved {
            provider: Arc::new(Gated {
                gate: Arc::clone(&self.gate),
                inner: provider,
            }),
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

/// A store that fails every write once `writes_left` reaches zero, and every call of the
/// methods named in `broken`.
struct Failing {
    inner: SqliteStore,
    writes_left: AtomicUsize,
    broken: std::sync::Mutex<Vec<&'static str>>,
    /// The writing methods called, in order.
    calls: std::sync::Mutex<Vec<&'static str>>,
    /// Bytes counted for every key on top of what it stores (a key near its quota).
    padding: std::sync::atomic::AtomicU64,
}

impl Failing {
    fn new() -> Self {
        Failing {
            inner: SqliteStore::in_memory().unwrap(),
            writes_left: AtomicUsize::new(usize::MAX),
            broken: std::sync::Mutex::default(),
            calls: std::sync::Mutex::default(),
            padding: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn break_only(&self, methods: &[&'static str]) {
        *self.broken.lock().unwrap() = methods.to_vec();
    }

    /// Notes a call of a writing method.
    fn called(&self, method: &'static str) {
        self.calls.lock().unwrap().push(method);
    }

    /// The writing methods called since the last look.
    fn take_calls(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    fn check(&self, method: &str) -> Result<(), StoreError> {
        match self.broken.lock().unwrap().contains(&method) {
            true => Err(StoreError::Backend(format!(
                "could not connect to the database ({method})"
            ))),
            false => Ok(()),
        }
    }

    fn write(&self) -> Result<(), StoreError> {
        self.writes_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .map(|_| ())
            .map_err(|_| StoreError::Backend("database is locked".into()))
    }

    /// A write of `messages`, when there are any.
    fn write_any(&self, messages: &[Message]) -> Result<(), StoreError> {
        match messages.is_empty() {
            true => Ok(()),
            false => self.write(),
        }
    }
}

/// The inner store's answer when `checked` passed, else its error.
fn gated<'a, T: Send + 'a>(
    checked: Result<(), StoreError>,
    go: impl FnOnce() -> BoxFuture<'a, Result<T, StoreError>>,
) -> BoxFuture<'a, Result<T, StoreError>> {
    match checked {
        Ok(()) => go(),
        Err(e) => Box::pin(async move { Err(e) }),
    }
}

impl Conversations for Failing {
    fn create_conversation<'a>(
        &'a self,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        self.called("create_conversation");
        gated(self.check("create_conversation"), || {
            self.inner.create_conversation(owner)
        })
    }
    fn session_conversation<'a>(
        &'a self,
        owner: &'a str,
        session: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        self.inner.session_conversation(owner, session)
    }
    fn conversation_info<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConversationInfo>, StoreError>> {
        self.inner.conversation_info(id)
    }
    fn list_conversations<'a>(
        &'a self,
        owner: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<ConversationSummary>, StoreError>> {
        self.inner.list_conversations(owner)
    }
    fn get_conversation<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConversationDetail>, StoreError>> {
        self.inner.get_conversation(id)
    }
    fn rename_conversation<'a>(
        &'a self,
        id: &'a str,
        title: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.inner.rename_conversation(id, title)
    }
    fn set_settings<'a>(
        &'a self,
        id: &'a str,
        settings: &'a serde_json::Value,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.called("set_settings");
        gated(self.check("set_settings"), || {
            self.inner.set_settings(id, settings)
        })
    }
    fn delete_conversation<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.inner.delete_conversation(id)
    }
}

impl History for Failing {
    fn load_counted<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<CountedHistory, StoreError>> {
        gated(self.check("load_messages"), || self.inner.load_counted(id))
    }
    fn append_counted<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        messages: &'a [Message],
        counts: &'a [Option<TokenCount>],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.called("append_counted");
        gated(self.write(), || {
            self.inner.append_counted(id, turn_id, messages, counts)
        })
    }
    fn remove_messages<'a>(
        &'a self,
        conversation: &'a str,
        seqs: &'a [i64],
    ) -> BoxFuture<'a, Result<usize, StoreError>> {
        self.inner.remove_messages(conversation, seqs)
    }
    fn stored_bytes<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let stored = self.inner.stored_bytes(owner).await?;
            Ok(stored + self.padding.load(Ordering::SeqCst))
        })
    }
}

impl Turns for Failing {
    fn open_turn<'a>(
        &'a self,
        opening: TurnOpening<'a>,
    ) -> BoxFuture<'a, Result<String, StoreError>> {
        self.called("open_turn");
        let checked = (|| {
            if opening.conversation.is_none() {
                self.check("create_conversation")?;
            }
            if opening.settings.is_some() {
                self.check("set_settings")?;
            }
            self.check("begin_turn")?;
            self.write_any(opening.messages)
        })();
        gated(checked, || self.inner.open_turn(opening))
    }
    fn begin_turn<'a>(
        &'a self,
        id: &'a str,
        turn_id: &'a str,
        model: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.called("begin_turn");
        gated(self.check("begin_turn"), || {
            self.inner.begin_turn(id, turn_id, model)
        })
    }
    fn finish_turn<'a>(
        &'a self,
        turn_id: &'a str,
        reason: StopReason,
        stats: &'a TurnStats,
        error: Option<&'a str>,
        tape: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.called("finish_turn");
        self.inner.finish_turn(turn_id, reason, stats, error, tape)
    }
    fn close_turn<'a>(&'a self, closing: TurnClosing<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        self.called("close_turn");
        gated(self.write_any(&closing.last.messages), || {
            self.inner.close_turn(closing)
        })
    }
    fn turn_tapes<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>> {
        self.inner.turn_tapes(id)
    }
    fn set_response_origin<'a>(
        &'a self,
        turn: &'a str,
        origin: &'a buddy_store::ResponseOrigin,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.set_response_origin(turn, origin)
    }
    fn delete_turn<'a>(
        &'a self,
        conversation: &'a str,
        turn: &'a str,
    ) -> BoxFuture<'a, Result<buddy_store::TurnDeletion, StoreError>> {
        self.inner.delete_turn(conversation, turn)
    }
}

impl Forks for Failing {}

impl Spend for Failing {
    fn add_spend<'a>(
        &'a self,
        owner: &'a str,
        day: &'a str,
        amount: buddy_core::Usd,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.add_spend(owner, day, amount)
    }
    fn spend_since<'a>(
        &'a self,
        owner: &'a str,
        first_day: &'a str,
    ) -> BoxFuture<'a, Result<buddy_core::Usd, StoreError>> {
        self.inner.spend_since(owner, first_day)
    }
}

impl Tasks for Failing {
    fn record_call_task<'a>(
        &'a self,
        id: &'a str,
        call_id: &'a str,
        task: &'a buddy_core::RecordedTask,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.record_call_task(id, call_id, task)
    }
    fn call_tasks<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<
        'a,
        Result<std::collections::HashMap<String, buddy_core::RecordedTask>, StoreError>,
    > {
        self.inner.call_tasks(id)
    }
}

pub(super) struct Setup {
    pub(super) state: AppState,
    gate: Arc<Semaphore>,
}

fn setup(
    store: Arc<dyn Store>,
    policy: PolicyConfig,
    tweak: impl FnOnce(&mut ServerSettings),
) -> Setup {
    let gate = Arc::new(Semaphore::new(OPEN_GATE));
    let mut settings = ServerSettings {
        api_keys: vec![
            ApiKey::new(ALICE, None, false),
            ApiKey::new(BOB, Some("bob"), false),
            ApiKey::new(ADMIN, Some("ops"), true),
        ],
        ..ServerSettings::default()
    };
    tweak(&mut settings);
    let state = AppState::new(
        store,
        Arc::new(TestBackend {
            gate: Arc::clone(&gate),
        }),
        policy,
        settings,
    );
    Setup { state, gate }
}

pub(super) fn open_setup() -> Setup {
    setup(
        Arc::new(SqliteStore::in_memory().unwrap()),
        PolicyConfig::default(),
        |_| {},
    )
}

pub(super) fn get(uri: &str, key: &str) -> Request<Body> {
    Request::get(uri)
        .header("authorization", format!("Bearer {key}"))
        .body(Body::empty())
        .unwrap()
}

fn delete(uri: &str, key: &str) -> Request<Body> {
    Request::delete(uri)
        .header("authorization", format!("Bearer {key}"))
        .body(Body::empty())
        .unwrap()
}

/// The SSE events of a whole response: (event name, data).
pub(super) fn events(body: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut name = String::new();
    for line in body.lines() {
        if let Some(n) = line.strip_prefix("event: ") {
            name = n.to_owned();
        } else if let Some(data) = line.strip_prefix("data: ") {
            out.push((
                name.clone(),
                serde_json::from_str(data).unwrap_or(Value::Null),
            ));
        }
    }
    out
}

/// Runs one whole turn; returns the conversation id and the terminal event.
pub(super) async fn turn(state: &AppState, body: Value, key: &str) -> (String, (String, Value)) {
    let (status, text) = send(state, post("/v1/chat", body, Some(key))).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let events = events(&text);
    let id = events[0].1["conversation_id"].as_str().unwrap().to_owned();
    (id, events.last().cloned().unwrap())
}

#[tokio::test]
async fn a_conversation_is_only_seen_by_the_key_that_made_it() {
    let s = open_setup();
    let (id, (end, _)) = turn(
        &s.state,
        json!({"message": "my password is hunter2"}),
        ALICE,
    )
    .await;
    assert_eq!(end, "done");
    let url = format!("/v1/conversations/{id}");

    // Bob: not listed, not readable, not continued, not deleted — 404, as if absent.
    let (_, list) = send(&s.state, get("/v1/conversations", BOB)).await;
    assert_eq!(
        serde_json::from_str::<Value>(&list).unwrap()["data"],
        json!([])
    );
    let (status, body) = send(&s.state, get(&url, BOB)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(!body.contains("hunter2"));
    let (status, _) = send(
        &s.state,
        post(
            "/v1/chat",
            json!({"conversation_id": id, "message": "injected"}),
            Some(BOB),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send(&s.state, delete(&url, BOB)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Alice still has it, untouched; the admin key sees everyone's.
    let (status, body) = send(&s.state, get(&url, ALICE)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains("hunter2") && !body.contains("injected"),
        "{body}"
    );
    let (_, list) = send(&s.state, get("/v1/conversations", ADMIN)).await;
    assert_eq!(
        serde_json::from_str::<Value>(&list).unwrap()["data"][0]["id"],
        id
    );
    let (status, _) = send(&s.state, get(&url, ADMIN)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = send(&s.state, delete(&url, ALICE)).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn quotas_count_by_key_identity_not_by_a_prefix() {
    let s = setup(
        Arc::new(SqliteStore::in_memory().unwrap()),
        PolicyConfig::default(),
        |settings| settings.max_concurrent_turns_per_key = 1,
    );
    // Hold Alice's turn open at its first model call.
    let held = s
        .gate
        .acquire_many(s.gate.available_permits() as u32)
        .await
        .unwrap();
    let router = app(s.state.clone());
    let first = router
        .clone()
        .oneshot(post("/v1/chat", json!({"message": "one"}), Some(ALICE)))
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let (status, body) = send(
        &s.state,
        post("/v1/chat", json!({"message": "two"}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    // Bob's key shares Alice's first characters, not her quota.
    let bob = router
        .oneshot(post("/v1/chat", json!({"message": "three"}), Some(BOB)))
        .await
        .unwrap();
    assert_eq!(bob.status(), StatusCode::OK);
    drop(held);
    s.gate.add_permits(1000);
    drop((first, bob));
    s.state.wait_for_turns().await;
}

#[tokio::test]
async fn a_request_may_lower_the_operators_limits_but_never_raise_them() {
    let policy = PolicyConfig {
        base: PolicyPatch::from_value(json!({"max_model_calls": 5})).unwrap(),
        ..PolicyConfig::default()
    };
    let s = setup(
        Arc::new(SqliteStore::in_memory().unwrap()),
        policy.clone(),
        |_| {},
    );
    let (status, body) = send(
        &s.state,
        post(
            "/v1/chat",
            json!({"message": "go", "policy": {"max_model_calls": 1000, "loop_detection": false}}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body.contains("max_model_calls = 1000 (this server's limit is 5)")
            && body.contains("loop_detection = false"),
        "{body}"
    );
    // The OpenAI endpoint holds to the same ceiling.
    let (status, body) = send(
        &s.state,
        post(
            "/v1/chat/completions",
            json!({"model": "model-a", "messages": [{"role": "user", "content": "go"}],
                   "buddy_policy": {"max_model_calls": 6}}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body.contains("max_model_calls = 6 (this server's limit is 5)"),
        "{body}"
    );
    // Lower is fine.
    let (_, (end, data)) = turn(
        &s.state,
        json!({"message": "go", "policy": {"max_model_calls": 3}}),
        ALICE,
    )
    .await;
    assert_eq!(
        (end.as_str(), data["reason"].as_str()),
        ("done", Some("completed"))
    );
    // An operator may let requests switch loop detection off (never raise the limits).
    let s = setup(
        Arc::new(SqliteStore::in_memory().unwrap()),
        policy,
        |settings| {
            settings.allow_loop_detection_off = true;
        },
    );
    let (_, (end, _)) = turn(
        &s.state,
        json!({"message": "go", "policy": {"loop_detection": false}}),
        ALICE,
    )
    .await;
    assert_eq!(end, "done");
}

#[tokio::test]
async fn a_second_turn_on_a_busy_conversation_gets_409_and_the_history_stays_whole() {
    let s = open_setup();
    let (id, _) = turn(&s.state, json!({"message": "first"}), ALICE).await;
    let held = s
        .gate
        .acquire_many(s.gate.available_permits() as u32)
        .await
        .unwrap();
    let router = app(s.state.clone());
    let running = router
        .clone()
        .oneshot(post(
            "/v1/chat",
            json!({"conversation_id": id, "message": "second"}),
            Some(ALICE),
        ))
        .await
        .unwrap();
    assert_eq!(running.status(), StatusCode::OK);
    for _ in 0..4 {
        let (status, body) = send(
            &s.state,
            post(
                "/v1/chat",
                json!({"conversation_id": id, "message": "parallel"}),
                Some(ALICE),
            ),
        )
        .await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(body.contains("already has a turn running"), "{body}");
    }
    let (status, _) = send(&s.state, delete(&format!("/v1/conversations/{id}"), ALICE)).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "no delete under a running turn"
    );
    drop(held);
    s.gate.add_permits(1000);
    let body = axum::body::to_bytes(running.into_body(), 1 << 20)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&body).contains("event: done"));
    // Free again, and the stored history is valid: no interleaved rounds.
    let (_, (end, _)) = turn(
        &s.state,
        json!({"conversation_id": id, "message": "third"}),
        ALICE,
    )
    .await;
    assert_eq!(end, "done");
    let messages = s.state_messages(&id).await;
    assert_history_valid(&messages);
    assert_eq!(messages.iter().filter(|m| m.is_user()).count(), 3);
}

impl Setup {
    async fn state_messages(&self, id: &str) -> Vec<Message> {
        let (_, body) = send(&self.state, get(&format!("/v1/conversations/{id}"), ADMIN)).await;
        serde_json::from_value(serde_json::from_str::<Value>(&body).unwrap()["messages"].clone())
            .unwrap()
    }
}

/// A server on a store a test can make fail, under the default policy.
fn failing_setup() -> (Arc<Failing>, Setup) {
    let store = Arc::new(Failing::new());
    let s = setup(
        Arc::clone(&store) as Arc<dyn Store>,
        PolicyConfig::default(),
        |_| {},
    );
    (store, s)
}

/// The per-key storage quota is on without any configuration (issue 60: off by default,
/// one key wrote 270 MB in 5 s): a key whose conversations hold the default's worth gets
/// 429 `insufficient_quota` for a stored turn; below it, turns run.
#[tokio::test]
async fn the_default_storage_quota_applies_without_configuration() {
    let (store, s) = failing_setup();
    let quota = buddy_server::DEFAULT_MAX_STORED_BYTES_PER_KEY as u64;
    assert_eq!(
        ServerSettings::default().max_stored_bytes_per_key as u64,
        quota
    );
    store.padding.store(quota - 10_000, Ordering::SeqCst);
    let (_, (end, _)) = turn(&s.state, json!({"message": "still room"}), ALICE).await;
    assert_eq!(end, "done");
    store.padding.store(quota, Ordering::SeqCst);
    let (status, text) = send(
        &s.state,
        post("/v1/chat", json!({"message": "one more"}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");
    assert!(
        text.contains("insufficient_quota") && text.contains("max_stored_bytes_per_key"),
        "{text}"
    );
}

#[tokio::test]
async fn a_store_that_fails_mid_turn_ends_it_with_store_error_and_leaves_whole_rounds() {
    let (store, s) = failing_setup();
    let (id, (end, _)) = turn(&s.state, json!({"message": "first"}), ALICE).await;
    assert_eq!(end, "done");

    // 1: the user message is written, the call message is not: the turn stops at the
    // failed write, before any other model call. 2: the call message is written too; the
    // round's result is not, and the turn stops before the model is called again. 3: the
    // round is whole on record; the answer, with the turn's end, is the write that fails.
    for (allowed, kept, model_calls, results) in [(1, 1, 1, 0), (2, 2, 1, 0), (3, 3, 2, 1)] {
        let before = s.state_messages(&id).await;
        store.writes_left.store(allowed, Ordering::SeqCst);
        let (_, (end, data)) = turn(
            &s.state,
            json!({"conversation_id": id, "message": "second"}),
            ALICE,
        )
        .await;
        assert_eq!(end, "error", "{data}");
        assert_eq!(data["reason"], "store_error");
        assert!(
            data["message"]
                .as_str()
                .unwrap()
                .contains("database is locked"),
            "{data}"
        );
        assert_eq!(
            data["stats"]["model_calls"], model_calls,
            "no model call after the failed write"
        );
        let after = s.state_messages(&id).await;
        assert_eq!(after.len(), before.len() + kept, "{after:#?}");
        assert_eq!(
            after
                .iter()
                .filter(|m| matches!(m, Message::Tool { .. }))
                .count(),
            before
                .iter()
                .filter(|m| matches!(m, Message::Tool { .. }))
                .count()
                + results,
            "a round's results are kept whole or not at all"
        );

        // With the store back, the conversation goes on and its history is valid (a
        // call left without results is answered as interrupted first).
        store.writes_left.store(usize::MAX, Ordering::SeqCst);
        let (_, (end, data)) = turn(
            &s.state,
            json!({"conversation_id": id, "message": "third"}),
            ALICE,
        )
        .await;
        assert_eq!(
            (end.as_str(), data["reason"].as_str()),
            ("done", Some("completed"))
        );
        assert_history_valid(&s.state_messages(&id).await);
    }

    store.writes_left.store(usize::MAX, Ordering::SeqCst);
    let (_, (end, _)) = turn(
        &s.state,
        json!({"conversation_id": id, "message": "fifth"}),
        ALICE,
    )
    .await;
    assert_eq!(end, "done");
    assert_history_valid(&s.state_messages(&id).await);
}

/// A stored turn of n tool rounds writes 2n + 2 times: its opening (the conversation when
/// new, the turn, the user's message) in one write, each round's call before its tools
/// run, the round's results together once the last is in (before the next model call),
/// and its answer with its end in one write.
#[tokio::test]
async fn a_turn_writes_its_opening_once_each_round_once_and_its_end_once() {
    let (store, s) = failing_setup();
    let (id, (end, _)) = turn(&s.state, json!({"message": "first"}), ALICE).await;
    assert_eq!(end, "done");
    let one_round = [
        "open_turn",
        "append_counted",
        "append_counted",
        "close_turn",
    ];
    assert_eq!(store.take_calls(), one_round);
    let (_, (end, _)) = turn(
        &s.state,
        json!({"conversation_id": id, "message": "second"}),
        ALICE,
    )
    .await;
    assert_eq!(end, "done");
    assert_eq!(store.take_calls(), one_round);
    // What they wrote is the whole conversation, each message once, in order.
    let messages = s.state_messages(&id).await;
    assert_history_valid(&messages);
    let texts: Vec<Option<&str>> = messages.iter().map(Message::text).collect();
    assert_eq!(
        texts.iter().filter(|t| **t == Some("first")).count(),
        1,
        "{messages:#?}"
    );
    assert_eq!(messages.len(), 8, "{messages:#?}");
    assert!(messages[0].is_user() && messages[4].is_user());
    assert_eq!(texts[3], Some("Found it."));
    assert_eq!(texts[7], Some("Found it."));
}

#[tokio::test]
async fn a_store_that_fails_before_the_turn_begins_is_a_retryable_store_error() {
    let (store, s) = failing_setup();
    let (id, _) = turn(&s.state, json!({"message": "first"}), ALICE).await;
    let listed = || async {
        let (_, list) = send(&s.state, get("/v1/conversations", ADMIN)).await;
        serde_json::from_str::<Value>(&list).unwrap()["data"]
            .as_array()
            .unwrap()
            .len()
    };
    let before = s.state_messages(&id).await;
    let cases = [
        ("create_conversation", "/v1/chat", json!({"message": "new"})),
        ("begin_turn", "/v1/chat", json!({"message": "new"})),
        (
            "load_messages",
            "/v1/chat",
            json!({"conversation_id": id, "message": "more"}),
        ),
        (
            "begin_turn",
            "/v1/chat",
            json!({"conversation_id": id, "message": "more"}),
        ),
        ("begin_turn", "/v1/responses", json!({"input": "new"})),
        (
            "create_conversation",
            "/v1/responses",
            json!({"input": "new"}),
        ),
    ];
    for (method, endpoint, body) in cases {
        store.break_only(&[method]);
        let response = app(s.state.clone())
            .oneshot(post(endpoint, body, Some(ALICE)))
            .await
            .unwrap();
        let status = response.status();
        let retry = response.headers().get("x-should-retry").cloned();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let error: Value = serde_json::from_slice(&bytes).unwrap();
        let what = format!("{method} on {endpoint}: {error}");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{what}");
        assert_eq!(error["error"]["type"], "store_error", "{what}");
        assert_eq!(retry.as_ref().map(|v| v.as_bytes()), Some(&b"true"[..]));
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("could not connect") && message.contains("no model was called"),
            "{what}"
        );
        store.break_only(&[]);
        // Nothing was left behind: no new conversation, no message, and the
        // conversation is free for the next turn at once.
        assert_eq!(listed().await, 1, "{what}");
        assert_eq!(s.state_messages(&id).await, before, "{what}");
    }
    let (_, (end, data)) = turn(
        &s.state,
        json!({"conversation_id": id, "message": "again"}),
        ALICE,
    )
    .await;
    assert_eq!(
        (end.as_str(), data["reason"].as_str()),
        ("done", Some("completed"))
    );
    assert_history_valid(&s.state_messages(&id).await);
}

#[tokio::test]
async fn a_continued_conversation_keeps_its_model() {
    let s = open_setup();
    let (id, _) = turn(
        &s.state,
        json!({"message": "hi", "model": "model-b"}),
        ALICE,
    )
    .await;
    let (status, body) = send(
        &s.state,
        post(
            "/v1/chat",
            json!({"conversation_id": id, "message": "again"}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(events(&body)[0].1["model"], "model-b");
    let (_, body) = send(
        &s.state,
        post(
            "/v1/chat",
            json!({"conversation_id": id, "message": "switch", "model": "model-a"}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(events(&body)[0].1["model"], "model-a");
}

#[tokio::test]
async fn a_running_turn_is_cancelled_by_its_own_key_only() {
    let s = open_setup();
    let _held = s
        .gate
        .acquire_many(s.gate.available_permits() as u32)
        .await
        .unwrap();
    let running = app(s.state.clone())
        .oneshot(post("/v1/chat", json!({"message": "slow"}), Some(ALICE)))
        .await
        .unwrap();
    let mut body = running.into_body().into_data_stream();
    let first = futures::StreamExt::next(&mut body).await.unwrap().unwrap();
    let opening = events(&String::from_utf8_lossy(&first));
    let turn = opening[0].1["turn_id"].as_str().unwrap().to_owned();
    let cancel = |key: &'static str| {
        Request::post(format!("/v1/turns/{turn}/cancel"))
            .header("authorization", format!("Bearer {key}"))
            .body(Body::empty())
            .unwrap()
    };
    let (status, _) = send(&s.state, cancel(BOB)).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another key cannot cancel it"
    );
    let (status, reply) = send(&s.state, cancel(ALICE)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{reply}");
    let mut rest = String::new();
    while let Some(chunk) = futures::StreamExt::next(&mut body).await {
        rest.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    let end = events(&rest).last().cloned().unwrap();
    assert_eq!(
        (end.0.as_str(), end.1["reason"].as_str()),
        ("done", Some("cancelled"))
    );
    let (status, _) = send(&s.state, cancel(ALICE)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "it is over");
}

/// Each of the six fields a request could once loosen, attacked alone through every
/// endpoint that takes a policy: each is refused and named.
#[tokio::test]
async fn no_request_loosens_the_window_reserve_or_answer_rules() {
    let operator = json!({
        "context_window": 16000, "reserve_output_tokens": 2000, "withdraw_tools_after": 6,
        "substantive_answer_chars": 200, "repeated_answer_min_chars": 80, "on_limit": "error"
    });
    let policy = PolicyConfig {
        base: PolicyPatch::from_value(operator).unwrap(),
        ..PolicyConfig::default()
    };
    let s = setup(Arc::new(SqliteStore::in_memory().unwrap()), policy, |_| {});
    let attacks = [
        ("context_window", json!(160000)),
        ("reserve_output_tokens", json!(100)),
        ("withdraw_tools_after", json!(0)),
        ("withdraw_tools_after", json!(60)),
        ("substantive_answer_chars", json!(0)),
        ("substantive_answer_chars", json!(2000)),
        ("repeated_answer_min_chars", json!(800)),
        ("on_limit", json!("finalize")),
    ];
    for (field, value) in attacks {
        let asked = json!({ field: value });
        let requests = [
            ("/v1/chat", json!({"message": "go", "policy": asked})),
            (
                "/v1/chat/completions",
                json!({"model": "model-a", "messages": [{"role": "user", "content": "go"}], "buddy_policy": asked}),
            ),
            (
                "/v1/responses",
                json!({"model": "model-a", "input": "go", "buddy_policy": asked}),
            ),
        ];
        for (path, body) in requests {
            let (status, text) = send(&s.state, post(path, body, Some(ALICE))).await;
            assert_eq!(
                status,
                StatusCode::BAD_REQUEST,
                "{path} {field}={value}: {text}"
            );
            assert!(
                text.contains(&format!("{field} = ")) && text.contains("this server's limit"),
                "{path} {field}={value}: {text}"
            );
        }
    }
    // Tightening each is fine.
    let (_, (end, data)) = turn(
        &s.state,
        json!({"message": "go", "policy": {"context_window": 8000, "reserve_output_tokens": 3000,
               "withdraw_tools_after": 3, "substantive_answer_chars": 100, "repeated_answer_min_chars": 40}}),
        ALICE,
    )
    .await;
    assert_eq!(
        (end.as_str(), data["reason"].as_str()),
        ("done", Some("completed")),
        "{data}"
    );
}

#[tokio::test]
async fn a_key_reads_only_its_own_usage_in_the_metrics() {
    let s = open_setup();
    turn(&s.state, json!({"message": "alice's turn"}), ALICE).await;
    turn(&s.state, json!({"message": "bob's turn"}), BOB).await;
    let metrics = |key: &'static str| {
        let state = s.state.clone();
        async move {
            let (status, text) = send(&state, get("/metrics", key)).await;
            assert_eq!(status, StatusCode::OK, "{text}");
            text
        }
    };
    let bob_series = "buddy_key_turns_total{key=\"bob\"}";
    let alice_sees = metrics(ALICE).await;
    assert!(!alice_sees.contains("key=\"bob\""), "{alice_sees}");
    assert!(
        alice_sees.contains("buddy_key_turns_total{key=\"key-"),
        "{alice_sees}"
    );
    assert!(
        alice_sees.contains("buddy_turns_total"),
        "shared series stay"
    );
    let bob_sees = metrics(BOB).await;
    assert!(bob_sees.contains(bob_series), "{bob_sees}");
    assert!(!bob_sees.contains("{key=\"key-"), "{bob_sees}");
    let ops_sees = metrics(ADMIN).await;
    assert!(ops_sees.contains(bob_series) && ops_sees.contains("{key=\"key-"));
    let (status, _) = send(&s.state, get("/metrics", "sk-wrong")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_turn_reports_what_it_cost_and_a_request_may_cap_it() {
    // Every reply reports 10 input + 5 output tokens: at $1,000 / $2,000 per million,
    // $0.02 a call.
    let s = setup(
        Arc::new(SqliteStore::in_memory().unwrap()),
        PolicyConfig::default(),
        |settings| {
            settings
                .prices
                .add(None, "*", buddy_core::Price::new(1_000.0, 2_000.0));
        },
    );
    let (id, (end, data)) = turn(&s.state, json!({"message": "look it up"}), ALICE).await;
    assert_eq!(end, "done", "{data}");
    assert_eq!(data["stats"]["model_calls"], 2);
    assert_eq!(data["stats"]["cost_usd"], 0.04, "{data}");
    // Stored with the turn, and counted per model and per key.
    let (_, body) = send(&s.state, get(&format!("/v1/conversations/{id}"), ALICE)).await;
    let stored: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(stored["turns"][0]["stats"]["cost_usd"], 0.04, "{stored}");
    let (_, metrics) = send(&s.state, get("/metrics", ADMIN)).await;
    assert!(metrics.contains("buddy_cost_usd_total{"), "{metrics}");
    assert!(metrics.contains("buddy_key_cost_usd_total{"), "{metrics}");

    // Room for the first call ($0.02) but not for two more: no answer call is made
    // (it would pass the budget); buddy answers from the tool result.
    let (_, (end, data)) = turn(
        &s.state,
        json!({"message": "look it up", "policy": {"max_turn_cost_usd": 0.03}}),
        ALICE,
    )
    .await;
    assert_eq!(end, "done", "{data}");
    assert_eq!(data["reason"], "cost_budget", "{data}");
    assert_eq!(data["stats"]["model_calls"], 1, "{data}");
    assert_eq!(data["stats"]["cost_usd"], 0.02, "{data}");
    assert!(
        data["answer"].as_str().unwrap_or_default().contains("42"),
        "answered from the tool result: {data}"
    );
    // With room for the answer call ($0.05): the call, the answer, $0.04 in all.
    let (_, (_, data)) = turn(
        &s.state,
        json!({"message": "look it up", "policy": {"max_turn_cost_usd": 0.05}}),
        ALICE,
    )
    .await;
    assert_eq!(data["reason"], "cost_budget", "{data}");
    assert_eq!(data["stats"]["model_calls"], 2, "{data}");
    assert_eq!(data["stats"]["cost_usd"], 0.04, "{data}");
    // A request may lower the operator's money budget, never raise or remove it.
    let capped = setup(
        Arc::new(SqliteStore::in_memory().unwrap()),
        PolicyConfig {
            base: PolicyPatch::from_value(json!({"max_turn_cost_usd": 0.5})).unwrap(),
            ..PolicyConfig::default()
        },
        |settings| {
            settings
                .prices
                .add(None, "*", buddy_core::Price::new(1.0, 1.0));
        },
    );
    for raise in [json!(5.0), json!(0)] {
        let (status, text) = send(
            &capped.state,
            post(
                "/v1/chat",
                json!({"message": "hi", "policy": {"max_turn_cost_usd": raise}}),
                Some(ALICE),
            ),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        assert!(text.contains("max_turn_cost_usd"), "{text}");
    }
}

#[tokio::test]
async fn a_key_at_its_spend_ceiling_is_refused_new_turns_with_429() {
    // Each call costs $0.02 (5 output tokens at $4,000 per million, input free) and may
    // write 5 tokens: its worst case is its cost. A turn of a call and its answer, $0.04.
    // Alice may spend $0.10 a day; keys without a ceiling of their own (Bob) get the
    // server's $0.03.
    let store: Arc<dyn Store> = Arc::new(SqliteStore::in_memory().unwrap());
    let priced = |settings: &mut ServerSettings| {
        settings
            .prices
            .add(None, "*", buddy_core::Price::new(0.0, 4_000.0));
        settings.api_keys[0] = ApiKey::new(ALICE, None, false).with_spend(SpendCeiling {
            daily: Usd::from_dollars(0.10),
            monthly: None,
        });
        settings.max_daily_cost_usd = Usd::from_dollars(0.03);
        settings.max_monthly_cost_usd = Usd::from_dollars(100.0);
    };
    let s = setup(Arc::clone(&store), PolicyConfig::default(), priced);
    let look = json!({"message": "look it up", "sampling": {"max_output_tokens": 5}});
    for _ in 0..2 {
        let (_, (_, data)) = turn(&s.state, look.clone(), ALICE).await;
        assert_eq!(data["reason"], "completed", "{data}");
        assert_eq!(data["stats"]["cost_usd"], 0.04, "{data}");
    }
    // $0.02 of room left: its first call reserves it, its answer call finds none, so it
    // ends cost_budget with an answer instead of passing the ceiling.
    let (_, (_, data)) = turn(&s.state, look.clone(), ALICE).await;
    assert_eq!(data["reason"], "cost_budget", "{data}");
    assert_eq!(data["stats"]["cost_usd"], 0.02, "{data}");
    let refused = |key: &'static str, state: AppState| async move {
        let (status, text) = send(
            &state,
            post("/v1/chat", json!({"message": "look it up"}), Some(key)),
        )
        .await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");
        let error: Value = serde_json::from_str(&text).unwrap();
        error["error"]["message"].as_str().unwrap().to_owned()
    };
    let message = refused(ALICE, s.state.clone()).await;
    assert!(
        message.contains("has spent $0.1000 today")
            && message.contains("daily ceiling is $0.1000")
            && message.contains("00:00 UTC"),
        "{message}"
    );
    // The OpenAI endpoint is refused the same way.
    let (status, _) = send(
        &s.state,
        post(
            "/v1/chat/completions",
            json!({"model": "model-a", "messages": [{"role": "user", "content": "hi"}]}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    // Bob has the server's ceiling, $0.03: a turn whose answer call finds no room ($0.02
    // spent), then one whose first call finds none — never past the ceiling, each
    // answered; once the ledger is at the ceiling (booked here), refused.
    for calls in [1, 0] {
        let (_, (_, data)) = turn(&s.state, look.clone(), BOB).await;
        assert_eq!(data["reason"], "cost_budget", "{data}");
        assert_eq!(data["stats"]["model_calls"], calls, "{data}");
    }
    let bob = ApiKey::new(BOB, Some("bob"), false).owner();
    let today = time::OffsetDateTime::now_utc().date();
    let today = format!(
        "{:04}-{:02}-{:02}",
        today.year(),
        u8::from(today.month()),
        today.day()
    );
    assert_eq!(
        store.spend_since(&bob, &today).await.unwrap(),
        Usd::from_dollars(0.02).unwrap()
    );
    store
        .add_spend(&bob, &today, Usd::from_dollars(0.01).unwrap())
        .await
        .unwrap();
    let message = refused(BOB, s.state.clone()).await;
    assert!(message.contains("key `bob`"), "{message}");
    // The ledger is in the store: a restarted server still refuses.
    let restarted = setup(Arc::clone(&store), PolicyConfig::default(), priced);
    refused(ALICE, restarted.state.clone()).await;
    // The admin key has the server's ceiling too, and has spent nothing.
    let (_, (end, _)) = turn(&restarted.state, look, ADMIN).await;
    assert_eq!(end, "done");
}
