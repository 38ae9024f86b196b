//! One spend gate (issue 60, items 1 and 2): every path that calls a model on a key's
//! behalf — turns, their sub-agents, continuations, the Messages facade, compaction —
//! holds its worst case under the key's ceiling, refuses an unpriced model under one,
//! takes a place under the key's turn cap and slots under its cap on model calls in
//! flight, and books its cost (at the operator's price) in the ledger and the metrics.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use buddy_core::{
    BoxFuture, CompletionRequest, Message, Price, Provider, ProviderError, TokenStream, ToolCall,
    Usd,
};
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_server::{
    ApiKey, AppState, Backend, BackendError, Resolved, ServerSettings, SpendCeiling,
};
use buddy_store::{SqliteStore, Store};
use buddy_testkit::{ReplyProvider, TestToolbox, reply_tokens};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::sharing::{ALICE, get};
use super::{post, send};

/// What the model server saw: calls made, calls in flight now and at most, and each
/// call's output bound.
#[derive(Default)]
pub(super) struct Seen {
    pub calls: AtomicUsize,
    live: AtomicUsize,
    pub peak: AtomicUsize,
    pub max_output: std::sync::Mutex<Vec<Option<u32>>>,
}

/// A model that summarises when asked to compact, delegates to `helper` three times at
/// once when it has that tool, and otherwise answers. Each call takes a while (or
/// waits at `gate` when there is one), so calls of turns started together overlap.
struct Counted {
    seen: Arc<Seen>,
    gate: Option<Arc<Semaphore>>,
    inner: ReplyProvider,
}

impl Counted {
    fn new(seen: Arc<Seen>, gate: Option<Arc<Semaphore>>) -> Self {
        let inner = ReplyProvider::new(|request, _| {
            let compacting = request.messages.iter().any(
                |m| matches!(m, Message::System { content } if content.starts_with("You compact")),
            );
            let delegates = request
                .tools
                .is_some_and(|tools| tools.iter().any(|t| t.name == "helper"));
            let answered = matches!(request.messages.last(), Some(Message::Tool { .. }));
            Ok(if compacting {
                reply_tokens("The user wants a summary.", vec![])
            } else if delegates && !answered {
                let calls = (0..3)
                    .map(|i| {
                        ToolCall::new(
                            format!("call_{i}"),
                            "helper",
                            json!({"task": format!("part {i}")}).to_string(),
                        )
                    })
                    .collect();
                reply_tokens("", calls)
            } else {
                reply_tokens("Done.", vec![])
            })
        });
        Counted { seen, gate, inner }
    }
}

impl Provider for Counted {
    fn name(&self) -> &str {
        "counted"
    }

    fn unsupported(&self, _: &buddy_core::Sampling) -> Option<String> {
        None
    }

    fn stream<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<TokenStream, ProviderError>> {
        Box::pin(async move {
            let seen = &self.seen;
            seen.calls.fetch_add(1, Ordering::SeqCst);
            let now = seen.live.fetch_add(1, Ordering::SeqCst) + 1;
            seen.peak.fetch_max(now, Ordering::SeqCst);
            seen.max_output
                .lock()
                .unwrap()
                .push(request.max_output_tokens);
            match &self.gate {
                Some(gate) => {
                    if let Ok(permit) = gate.acquire().await {
                        permit.forget();
                    }
                }
                None => tokio::time::sleep(Duration::from_millis(40)).await,
            }
            seen.live.fetch_sub(1, Ordering::SeqCst);
            self.inner.stream(request).await
        })
    }
}

struct Models {
    seen: Arc<Seen>,
    gate: Option<Arc<Semaphore>>,
}

impl Backend for Models {
    fn models(&self) -> Vec<String> {
        vec!["model-a".into(), "model-b".into()]
    }

    fn resolve(&self, _: Option<&str>, model: Option<&str>) -> Result<Resolved, BackendError> {
        let model = model.unwrap_or("model-a").to_owned();
        if !self.models().contains(&model) {
            return Err(BackendError(format!("unknown model `{model}`")));
        }
        Ok(Resolved {
            provider: Arc::new(Counted::new(Arc::clone(&self.seen), self.gate.clone())),
            toolbox: Arc::new(TestToolbox::new()),
            model,
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

/// A server of one key, ALICE (named `name`), whose daily ceiling is `daily`; `edit`
/// sets the rest.
pub(super) fn server(
    name: &str,
    daily: Option<f64>,
    gate: Option<Arc<Semaphore>>,
    edit: impl FnOnce(&mut ServerSettings),
) -> (AppState, Arc<Seen>, Arc<dyn Store>) {
    let seen = Arc::new(Seen::default());
    let store: Arc<dyn Store> = Arc::new(SqliteStore::in_memory().unwrap());
    let mut settings = ServerSettings {
        api_keys: vec![
            ApiKey::new(ALICE, Some(name), false).with_spend(SpendCeiling {
                daily: daily.map(|d| Usd::from_dollars(d).unwrap()),
                monthly: None,
            }),
        ],
        ..ServerSettings::default()
    };
    edit(&mut settings);
    let backend = Arc::new(Models {
        seen: Arc::clone(&seen),
        gate,
    });
    let state = AppState::new(
        Arc::clone(&store),
        backend,
        PolicyConfig::default(),
        settings,
    );
    (state, seen, store)
}

fn owner() -> String {
    ApiKey::new(ALICE, None, false).owner()
}

async fn compact(state: &AppState, input: Value) -> (StatusCode, Value) {
    let body = json!({"model": "model-a", "input": input});
    let (status, text) = send(state, post("/v1/responses/compact", body, Some(ALICE))).await;
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// About 900 KB of conversation.
fn long_conversation() -> Value {
    let text = "We discussed the launch plan, the budget and who tells support. ".repeat(14_000);
    json!([{"role": "user", "content": text}])
}

#[tokio::test]
async fn a_compact_whose_input_passes_the_ceiling_is_refused_and_a_small_one_is_capped_and_booked()
{
    // $1 per million input tokens, $10 per million output; $0.10 a day.
    let (state, seen, store) = server("compactor", Some(0.10), None, |s| {
        s.prices.add(None, "model-a", Price::new(1.0, 10.0));
    });
    let (status, body) = compact(&state, long_conversation()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("input alone"), "{message}");
    assert_eq!(seen.calls.load(Ordering::SeqCst), 0, "no model call made");
    assert_eq!(
        store.spend_since(&owner(), "2000-01-01").await.unwrap(),
        Usd::ZERO
    );

    // A small one runs, bounded by what its hold leaves, and is booked.
    let (status, body) = compact(
        &state,
        json!([{"role": "user", "content": "Plan the launch."}]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let bound = seen.max_output.lock().unwrap()[0];
    assert!(bound.is_some_and(|b| b <= 16 * 1024), "{bound:?}");
    // 10 tokens in, 5 out: $0.00001 + $0.00005.
    let spent = store.spend_since(&owner(), "2000-01-01").await.unwrap();
    assert_eq!(spent, Usd::from_dollars(0.00006).unwrap());
}

#[tokio::test]
async fn compacts_on_an_unpriced_model_are_refused_under_a_ceiling() {
    let (state, seen, _) = server("unpriced", Some(1.0), None, |_| {});
    for _ in 0..3 {
        let (status, body) = compact(&state, json!("hello")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("model `model-a` has no price"),
            "{message}"
        );
    }
    assert_eq!(seen.calls.load(Ordering::SeqCst), 0);
    // Without a ceiling nothing needs counting: it runs.
    let (state, _, _) = server("unpriced-open", None, None, |_| {});
    assert_eq!(compact(&state, json!("hello")).await.0, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_compacts_of_one_key_at_once_keep_its_turn_cap() {
    let gate = Arc::new(Semaphore::new(0));
    let (state, seen, _) = server("many", None, Some(Arc::clone(&gate)), |s| {
        s.max_concurrent_turns_per_key = 8;
    });
    let runs: Vec<_> = (0..40)
        .map(|_| {
            let state = state.clone();
            tokio::spawn(async move { compact(&state, json!("hello")).await })
        })
        .collect();
    let settled = async {
        while runs.iter().filter(|r| r.is_finished()).count() < 32 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(30), settled).await;
    gate.add_permits(1 << 20);
    let mut statuses = Vec::new();
    for run in runs {
        statuses.push(run.await.unwrap().0);
    }
    let ran = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    let refused = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!((ran, refused), (8, 32), "{statuses:?}");
    assert_eq!(seen.peak.load(Ordering::SeqCst), 8);
    // Their places are given back: the next one runs.
    assert_eq!(compact(&state, json!("hello")).await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_compactions_cost_is_in_the_keys_metrics() {
    let (state, _, _) = server("compaction-metrics", None, None, |s| {
        s.prices.add(None, "*", Price::new(1_000.0, 2_000.0));
    });
    assert_eq!(compact(&state, json!("hello")).await.0, StatusCode::OK);
    let (status, metrics) = send(&state, get("/metrics", ALICE)).await;
    assert_eq!(status, StatusCode::OK, "{metrics}");
    let line = metrics
        .lines()
        .find(|l| l.starts_with("buddy_key_cost_usd_total{key=\"compaction-metrics\"}"));
    // 10 tokens in, 5 out at $1,000 / $2,000 per million: $0.02.
    let value: f64 = line
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no cost series for the key: {metrics}"));
    assert!((value - 0.02).abs() < 1e-9, "{line:?}");
}

/// A turn of ALICE that hands three parts to a `helper` sub-agent on `model`.
fn delegating(model: &str) -> Value {
    json!({
        "message": "split the work",
        "agents": [{"name": "helper", "description": "does one part", "model": model}]
    })
}

async fn turn_ends(state: &AppState, body: Value) -> Value {
    let (status, text) = send(state, post("/v1/chat", body, Some(ALICE))).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let last = super::sharing::events(&text).last().cloned().unwrap();
    assert_eq!(last.0, "done", "{text}");
    last.1
}

#[tokio::test]
async fn a_request_agent_naming_a_model_is_booked_at_the_operators_price() {
    // model-a $0.02 a call, model-b (no list price) $0.20 a call at the operator's price.
    let (state, seen, store) = server("priced-agents", None, None, |s| {
        s.prices.add(None, "model-a", Price::new(1_000.0, 2_000.0));
        s.prices
            .add(None, "model-b", Price::new(10_000.0, 20_000.0));
    });
    let done = turn_ends(&state, delegating("model-b")).await;
    // Two calls of the turn, one of each of three helpers.
    assert_eq!(seen.calls.load(Ordering::SeqCst), 5, "{done}");
    let expected = Usd::from_dollars(2.0 * 0.02 + 3.0 * 0.2).unwrap();
    let cost = done["stats"]["cost_usd"].as_f64().unwrap_or_default();
    assert!((cost - expected.dollars()).abs() < 1e-9, "{done}");
    let spent = store.spend_since(&owner(), "2000-01-01").await.unwrap();
    assert_eq!(spent, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_model_calls_in_flight_stay_under_its_cap_across_turns_and_sub_agents() {
    for (cap, bounded) in [(2, true), (16, false)] {
        let (state, seen, _) = server("in-flight", None, None, |s| {
            s.max_model_calls_in_flight_per_key = cap;
        });
        let turns: Vec<_> = (0..2)
            .map(|_| {
                let state = state.clone();
                tokio::spawn(async move { turn_ends(&state, delegating("model-a")).await })
            })
            .collect();
        for turn in turns {
            turn.await.unwrap();
        }
        assert_eq!(seen.calls.load(Ordering::SeqCst), 10);
        let peak = seen.peak.load(Ordering::SeqCst);
        if bounded {
            assert!(peak <= cap, "{peak} calls in flight, cap {cap}");
        } else {
            // The measure can see more: two turns' six helpers overlap without the cap.
            assert!(peak > 2, "{peak}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_whose_client_leaves_is_still_booked_and_frees_its_place() {
    let gate = Arc::new(Semaphore::new(0));
    let (state, seen, store) = server("leaver", Some(1.0), Some(Arc::clone(&gate)), |s| {
        s.prices.add(None, "*", Price::new(1_000.0, 2_000.0));
        s.max_concurrent_turns_per_key = 1;
    });
    let client = {
        let state = state.clone();
        tokio::spawn(async move { compact(&state, json!("hello")).await })
    };
    while seen.calls.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    client.abort();
    let _ = client.await;
    gate.add_permits(1 << 20);
    // The call ran to its end on the server's task: booked ($0.02), its place given back.
    let spent = async {
        loop {
            let spent = store.spend_since(&owner(), "2000-01-01").await.unwrap();
            if spent > Usd::ZERO {
                return spent;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let spent = tokio::time::timeout(Duration::from_secs(10), spent)
        .await
        .expect("the compaction was never booked");
    assert_eq!(spent, Usd::from_dollars(0.02).unwrap());
    assert_eq!(compact(&state, json!("hello")).await.0, StatusCode::OK);
}
