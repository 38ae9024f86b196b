//! Sub-agents on the server (issue 45): declared per request on `/v1/chat` (checked, a
//! bad one a 400 naming `agents[i]`, its policy under the operator's ceilings) or by the
//! backend; their events on the native stream and on reattach, never in the OpenAI
//! facades' answers; a tree's cost is what the key's spend ledger books.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use buddy_core::{Provider, Toolbox, Usd};
use buddy_engine::{PolicyConfig, PolicyPatch};
use buddy_scripted::run::{scenario_registry, with_agents};
use buddy_scripted::{Scenario, ScriptedProvider};
use buddy_server::{
    ApiKey, AppState, Backend, BackendError, Resolved, ServerSettings, SpendCeiling,
};
use buddy_skills::Sandbox;
use buddy_store::{SqliteStore, Store};
use serde_json::{Value, json};

use super::sharing::events;
use super::{post, send};

/// The model of these turns: one with a built-in price, so a tree's cost is counted.
pub(super) const MODEL: &str = "gpt-4o-mini";

/// The `helper` agent as a request (or the backend) declares it.
fn helper() -> Value {
    json!({
        "name": "helper",
        "description": "Looks one topic up and reports.",
        "instructions": "You are the helper sub-agent. Look the topic up, then report.",
        "skills": ["lookup"]
    })
}

/// A model that hands two topics to `helper` agents, each of which looks its topic up
/// once and reports; then it sums up. `agents`: the backend declares `helper` itself.
fn scenario(agents: bool) -> Scenario {
    let mut script = json!({
        "name": "tree", "prompt": "go",
        "expect": {"stop_reason": "completed", "model_calls": 6, "tool_calls": 4},
        "tools": [{
            "name": "lookup", "description": "Looks a topic up.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
            "template": "entry for {q}"
        }],
        "rules": [
            {"when": {"system_contains": "helper sub-agent", "round": 2},
             "reply": {"text": "Report on {user}: {last_result}"}},
            {"when": {"system_contains": "helper sub-agent"},
             "reply": {"text": "Looking.", "tool_calls": [{"name": "lookup", "arguments": {"q": "{user}"}}]}},
            {"when": {"round": 1},
             "reply": {"text": "Delegating.", "tool_calls": [
                 {"name": "helper", "arguments": {"task": "alpha"}},
                 {"name": "helper", "arguments": {"task": "beta"}}]}},
            {"when": {}, "reply": {"text": "Summary of {results} reports."}}
        ]
    });
    if agents {
        script["agents"] = json!([helper()]);
    }
    Scenario::parse(&script.to_string(), "test").unwrap()
}

/// Serves [`scenario`] as `gpt-4o-mini`, with fresh stub tools every turn.
pub(super) struct Tree {
    /// The backend offers `helper` (as buddy.toml's `[[agents]]` would).
    pub(super) agents: bool,
    pub(super) sandbox: tempfile::TempDir,
}

impl Backend for Tree {
    fn models(&self) -> Vec<String> {
        vec![MODEL.into()]
    }

    fn resolve(
        &self,
        _provider: Option<&str>,
        model: Option<&str>,
    ) -> Result<Resolved, BackendError> {
        if model.is_some_and(|m| m != MODEL) {
            return Err(BackendError(format!(
                "unknown model `{}`",
                model.unwrap_or_default()
            )));
        }
        let scenario = scenario(self.agents);
        let sandbox = Sandbox::new(self.sandbox.path()).unwrap();
        let registry: Arc<dyn Toolbox> = Arc::new(scenario_registry(&scenario, &sandbox).unwrap());
        let provider: Arc<dyn Provider> = Arc::new(ScriptedProvider::new(Arc::new(scenario)));
        let scenario = self::scenario(self.agents);
        Ok(Resolved {
            toolbox: with_agents(&scenario, registry, &provider).unwrap(),
            provider,
            model: MODEL.into(),
            policy: PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

fn server(agents: bool, policy: PolicyConfig, settings: ServerSettings) -> AppState {
    AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Tree {
            agents,
            sandbox: tempfile::tempdir().unwrap(),
        }),
        policy,
        settings,
    )
}

/// The `agent` events of a native stream: (path of agent names, inner event's type).
fn agent_events(stream: &[(String, Value)]) -> Vec<(Vec<String>, String)> {
    stream
        .iter()
        .filter(|(name, _)| name == "agent")
        .map(|(_, data)| {
            let path = data["path"]
                .as_array()
                .unwrap()
                .iter()
                .map(|hop| hop["agent"].as_str().unwrap().to_owned())
                .collect();
            (path, data["event"]["type"].as_str().unwrap().to_owned())
        })
        .collect()
}

#[tokio::test]
async fn agents_declared_per_request_run_and_stream_their_steps() {
    let state = server(false, PolicyConfig::default(), ServerSettings::default());
    let (status, body) = send(
        &state,
        post(
            "/v1/chat",
            json!({"message": "go", "agents": [helper()]}),
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let stream = events(&body);
    let nested = agent_events(&stream);
    // Each child's steps, under the path `helper`, with their own tool calls.
    for kind in ["text_delta", "tool_call_start", "tool_call_result", "done"] {
        let count = nested
            .iter()
            .filter(|(path, k)| path == &["helper"] && k == kind)
            .count();
        assert!(count >= 2, "{kind}: {count} in {nested:?}");
    }
    let child_calls: Vec<&Value> = stream
        .iter()
        .filter(|(name, d)| name == "agent" && d["event"]["type"] == "tool_call_start")
        .map(|(_, d)| &d["event"])
        .collect();
    assert!(
        child_calls.iter().all(|e| e["name"] == "lookup"),
        "{child_calls:?}"
    );
    // The top level's own text is its own: no child's text among it.
    let top_text: String = stream
        .iter()
        .filter(|(name, _)| name == "text_delta")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect();
    assert_eq!(top_text, "Delegating.Summary of 2 reports.");
    let (name, done) = stream.last().unwrap();
    assert_eq!(name, "done");
    assert_eq!(done["reason"], "completed");
    assert_eq!(done["answer"], "Summary of 2 reports.");
    // The stats cover the tree: 2 own calls and 2 of each child.
    assert_eq!(done["stats"]["delegated"]["agents"], 2);
    assert_eq!(done["stats"]["delegated"]["model_calls"], 4);
    assert_eq!(done["stats"]["model_calls"], 6);
}

#[tokio::test]
async fn the_operators_agents_are_offered_and_a_request_may_add_its_own() {
    let state = server(true, PolicyConfig::default(), ServerSettings::default());
    let (status, body) = send(&state, post("/v1/chat", json!({"message": "go"}), None)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let stream = events(&body);
    assert_eq!(stream.last().unwrap().1["answer"], "Summary of 2 reports.");
    assert!(agent_events(&stream).len() >= 8);
    // A request's agent beside the operator's: named apart, both offered.
    let mut other = helper();
    other["name"] = json!("second");
    let (status, body) = send(
        &state,
        post(
            "/v1/chat",
            json!({"message": "go", "agents": [other]}),
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(events(&body).last().unwrap().1["reason"], "completed");
    // One named like the operator's is refused: which a call meant would be a guess.
    let (status, body) = send(
        &state,
        post(
            "/v1/chat",
            json!({"message": "go", "agents": [helper()]}),
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body.contains("`agents[0]`") && body.contains("already a tool of this server"),
        "{body}"
    );
}

#[tokio::test]
async fn a_bad_declaration_is_a_400_naming_the_field() {
    let policy: PolicyConfig = serde_json::from_value(json!({"max_model_calls": 20})).unwrap();
    let state = server(false, policy, ServerSettings::default());
    let with = |change: &dyn Fn(&mut Value)| {
        let mut agent = helper();
        change(&mut agent);
        json!({"message": "go", "agents": [helper_named("first"), agent]})
    };
    let cases: Vec<(Value, &str)> = vec![
        (with(&|a| a["tools"] = json!([])), "unknown field `tools`"),
        (
            with(&|a| a["description"] = json!(" ")),
            "has no description",
        ),
        (
            with(&|a| a["name"] = json!("a b")),
            "is not usable as a tool name",
        ),
        (
            with(&|a| a["name"] = json!("lookup")),
            "already a tool of this server",
        ),
        (with(&|a| a["history"] = json!(99)), "history messages"),
        (
            with(&|a| a["policy"] = json!({"max_model_calls": 50})),
            "`policy`: the request's policy asks for more than this server allows",
        ),
        (
            with(&|a| a["policy"] = json!({"max_model_calls": "many"})),
            "`agents[1]`",
        ),
        (
            with(&|a| a["model"] = json!("gpt-9")),
            "unknown model `gpt-9`",
        ),
        (
            with(&|a| a["agents"] = json!(["nobody"])),
            "`nobody`, which is not declared",
        ),
    ];
    for (body, expected) in cases {
        let (status, text) = send(&state, post("/v1/chat", body.clone(), None)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {text}");
        assert!(text.contains(expected), "{body}: {text}");
        assert!(text.contains("agents"), "{text}");
    }
    let many: Vec<Value> = (0..9).map(|i| helper_named(&format!("a{i}"))).collect();
    let (status, text) = send(
        &state,
        post("/v1/chat", json!({"message": "go", "agents": many}), None),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("at most 8 sub-agents"), "{text}");
    // Nothing was started by a refused request.
    let (_, list) = send(
        &state,
        Request::get("/v1/conversations")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(
        serde_json::from_str::<Value>(&list).unwrap()["data"],
        json!([])
    );
    // Lowering a limit is fine.
    let mut lowered = helper();
    lowered["policy"] = json!({"max_model_calls": 5});
    let (status, text) = send(
        &state,
        post(
            "/v1/chat",
            json!({"message": "go", "agents": [lowered]}),
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
}

fn helper_named(name: &str) -> Value {
    let mut agent = helper();
    agent["name"] = json!(name);
    agent
}

#[tokio::test]
async fn reattaching_to_a_finished_turn_replays_its_agent_events() {
    let state = server(true, PolicyConfig::default(), ServerSettings::default());
    let (_, body) = send(&state, post("/v1/chat", json!({"message": "go"}), None)).await;
    let live = events(&body);
    let turn = live[0].1["turn_id"].as_str().unwrap().to_owned();
    let (status, again) = send(
        &state,
        Request::get(format!("/v1/turns/{turn}/events?after=0"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    let replayed = events(&again);
    // Every event after the opening, the agents' included, exactly as it was sent.
    assert_eq!(replayed, live[1..].to_vec());
    assert!(agent_events(&replayed).len() >= 8);
}

#[tokio::test]
async fn the_openai_facades_show_only_the_top_level_answer() {
    let state = server(true, PolicyConfig::default(), ServerSettings::default());
    let messages = json!([{"role": "user", "content": "go"}]);
    // Chat Completions, whole and streamed.
    let (status, body) = send(
        &state,
        post(
            "/v1/chat/completions",
            json!({"model": MODEL, "messages": messages}),
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let whole: Value = serde_json::from_str(&body).unwrap();
    let message = &whole["choices"][0]["message"];
    assert_eq!(message["content"], "Summary of 2 reports.");
    assert!(
        message.get("tool_calls").is_none_or(Value::is_null),
        "{message}"
    );
    let (_, body) = send(
        &state,
        post(
            "/v1/chat/completions",
            json!({"model": MODEL, "messages": messages, "stream": true}),
            None,
        ),
    )
    .await;
    let text: String = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text, "Delegating.\n\nSummary of 2 reports.");
    assert_no_child(&body);
    // Responses, whole and streamed: the top level's calls to `helper` are its items; a
    // child's text and its `lookup` calls never are.
    let (status, body) = send(
        &state,
        post(
            "/v1/responses",
            json!({"model": MODEL, "input": "go"}),
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let response: Value = serde_json::from_str(&body).unwrap();
    let items = response["output"].as_array().unwrap();
    let called: Vec<&str> = items.iter().filter_map(|i| i["name"].as_str()).collect();
    assert_eq!(called, ["helper", "helper"], "{items:?}");
    let said: Vec<&str> = items
        .iter()
        .filter(|i| i["type"] == "message")
        .flat_map(|i| i["content"].as_array().unwrap())
        .filter_map(|c| c["text"].as_str())
        .collect();
    assert_eq!(
        said,
        ["Delegating.\n\n", "Summary of 2 reports."],
        "{items:?}"
    );
    assert_no_child(&body);
    let (_, body) = send(
        &state,
        post(
            "/v1/responses",
            json!({"model": MODEL, "input": "go", "stream": true}),
            None,
        ),
    )
    .await;
    assert!(body.contains("response.completed"), "{body}");
    assert_no_child(&body);
}

/// Nothing of a child's own in a facade's body: not its text, not its tool calls.
fn assert_no_child(body: &str) {
    assert!(!body.contains("Looking."), "a child's text leaked: {body}");
    assert!(
        !body.contains("lookup"),
        "a child's tool call leaked: {body}"
    );
}

#[tokio::test]
async fn a_trees_cost_is_what_the_keys_spend_ledger_books() {
    let key = ApiKey::new("sk-alice", None, false).with_spend(SpendCeiling {
        daily: Usd::from_dollars(5.0),
        monthly: None,
    });
    let owner = key.owner();
    let settings = ServerSettings {
        api_keys: vec![key],
        ..ServerSettings::default()
    };
    let store: Arc<dyn Store> = Arc::new(SqliteStore::in_memory().unwrap());
    let state = AppState::new(
        Arc::clone(&store),
        Arc::new(Tree {
            agents: true,
            sandbox: tempfile::tempdir().unwrap(),
        }),
        PolicyConfig::default(),
        settings,
    );
    let (status, body) = send(
        &state,
        post("/v1/chat", json!({"message": "go"}), Some("sk-alice")),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let stream = events(&body);
    let done = &stream.last().unwrap().1;
    assert_eq!(done["reason"], "completed", "{done}");
    let cost: Usd = serde_json::from_value(done["stats"]["cost_usd"].clone()).unwrap();
    let delegated: Usd =
        serde_json::from_value(done["stats"]["delegated"]["cost_usd"].clone()).unwrap();
    // The children's cost is counted, and is part of the turn's.
    let children: u64 = stream
        .iter()
        .filter(|(name, d)| name == "agent" && d["event"]["type"] == "done")
        .map(|(_, d)| {
            serde_json::from_value::<Usd>(d["event"]["stats"]["cost_usd"].clone())
                .unwrap()
                .nanos()
        })
        .sum();
    assert!(children > 0);
    assert_eq!(delegated.nanos(), children);
    assert!(
        cost > delegated,
        "{cost:?} covers {delegated:?} and the top level's own"
    );
    state.wait_for_turns().await;
    let booked = store.spend_since(&owner, "2000-01-01").await.unwrap();
    assert_eq!(booked, cost, "the ledger books the whole tree");
}
