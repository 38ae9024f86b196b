//! `POST /v1/responses` through the router: output items, the stream's events in order,
//! `previous_response_id` within a key's own conversations, `store: false`,
//! `max_tool_calls`, and errors.

use std::sync::Arc;

use axum::http::StatusCode;
use buddy_engine::PolicyConfig;
use buddy_server::{ApiKey, AppState, ServerSettings};
use buddy_store::SqliteStore;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::sharing::{ALICE, BOB, OPEN_GATE, TestBackend, events};
use super::{post, send};

fn state() -> AppState {
    AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(TestBackend {
            gate: Arc::new(Semaphore::new(OPEN_GATE)),
        }),
        PolicyConfig::default(),
        ServerSettings {
            api_keys: vec![
                ApiKey::new(ALICE, None, false),
                ApiKey::new(BOB, None, false),
            ],
            ..ServerSettings::default()
        },
    )
}

/// `GET uri` with `key`, and its JSON (`Null` when it is none).
async fn get_json(state: &AppState, uri: String, key: &str) -> (StatusCode, Value) {
    let request = axum::http::Request::get(uri)
        .header("authorization", format!("Bearer {key}"))
        .body(axum::body::Body::empty())
        .unwrap();
    let (status, text) = send(state, request).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn respond(state: &AppState, body: Value, key: &str) -> (StatusCode, Value) {
    let (status, text) = send(state, post("/v1/responses", body, Some(key))).await;
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn a_response_lists_server_side_calls_and_the_answer() {
    let state = state();
    let (status, response) = respond(
        &state,
        json!({"model": "model-a", "input": "find it"}),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{response}");
    assert_eq!(response["object"], "response");
    assert_eq!(response["status"], "completed");
    let kinds: Vec<&str> = response["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["mcp_call", "message"], "{response}");
    assert_eq!(response["output"][0]["name"], "lookup");
    assert_eq!(response["output"][0]["output"], "42");
    assert_eq!(response["output"][1]["content"][0]["text"], "Found it.");
    assert_eq!(response["usage"]["total_tokens"], 30);
}

#[tokio::test]
async fn skill_calls_can_be_spec_extension_items_and_come_back_as_input() {
    let state = state();
    let (status, response) = respond(
        &state,
        json!({"model": "model-a", "input": "find it", "store": false,
               "buddy_skill_calls": "buddy:skill_call"}),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{response}");
    let call = &response["output"][0];
    assert_eq!(call["type"], "buddy:skill_call", "{response}");
    assert_eq!(
        (call["name"].as_str(), call["output"].as_str()),
        (Some("lookup"), Some("42"))
    );
    assert!(call["call_id"].as_str().is_some_and(|id| !id.is_empty()));
    assert!(call.get("server_label").is_none());
    // The whole output sent back (store: false) is a valid history: the call and its result.
    let mut input = vec![json!({"role": "user", "content": "find it"})];
    input.extend(response["output"].as_array().unwrap().iter().cloned());
    input.push(json!({"role": "user", "content": "and now?"}));
    let (status, again) = respond(
        &state,
        json!({"model": "model-a", "input": input, "store": false}),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["output"][0]["type"], "mcp_call", "the default form");
    let (status, bad) = respond(
        &state,
        json!({"model": "model-a", "input": "x", "buddy_skill_calls": "tool_call"}),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
}

#[tokio::test]
async fn the_stream_sends_the_apis_events_in_order() {
    let state = state();
    let (status, body) = send(
        &state,
        post(
            "/v1/responses",
            json!({"model": "model-a", "input": "find it", "stream": true}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // The stream ends with the literal [DONE], as the Open Responses specification asks.
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let body = body.trim_end_matches("data: [DONE]\n\n");
    let events = events(body);
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    for (i, (kind, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], kind.as_str());
        assert_eq!(data["sequence_number"], i, "numbered in order");
    }
    assert_eq!(events[0].1["response"]["status"], "in_progress");
    assert_eq!(
        events.last().unwrap().1["response"]["output"][1]["content"][0]["text"],
        "Found it."
    );
}

#[tokio::test]
async fn previous_response_id_continues_only_the_keys_own_stored_conversation() {
    let state = state();
    let (_, first) = respond(
        &state,
        json!({"model": "model-b", "input": "find it"}),
        ALICE,
    )
    .await;
    let id = first["id"].as_str().unwrap();
    // Bob cannot continue (or even see) Alice's response.
    let (status, _) = respond(
        &state,
        json!({"previous_response_id": id, "input": "again"}),
        BOB,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Alice continues it, and its model is kept.
    let (status, second) = respond(
        &state,
        json!({"previous_response_id": id, "input": "again"}),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["model"], "model-b");
    assert_eq!(second["previous_response_id"], id);
    // A response kept nowhere cannot be continued.
    let (_, ephemeral) = respond(&state, json!({"input": "find it", "store": false}), ALICE).await;
    let (status, error) = respond(
        &state,
        json!({"previous_response_id": ephemeral["id"], "input": "again"}),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not stored")
    );
}

#[tokio::test]
async fn max_tool_calls_is_honoured_and_bad_input_is_named() {
    let state = state();
    let (status, response) = respond(
        &state,
        json!({"model": "model-a", "input": "find it", "max_tool_calls": 1}),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{response}");
    assert_eq!(response["buddy"]["tool_calls"], 1, "{response}");
    for (body, words) in [
        (
            json!({"input": [{"type": "item_reference", "id": "x"}]}),
            "not known here",
        ),
        // A hosted tool (`file_search`) is left out, not refused (see responses_codex);
        // a malformed tool is.
        (
            json!({"input": "hi", "tools": [{"type": "namespace", "name": "n"}]}),
            "a namespace tool needs `tools`",
        ),
        (
            json!({"input": [{"role": "assistant", "content": "hello"}]}),
            "no user message",
        ),
        (json!({"input": 42}), "must be a string or a list"),
        // A client tool may not take the name of a server skill (`lookup` here).
        (
            json!({"model": "model-a", "input": "hi", "tools": [{"type": "function", "name": "lookup"}]}),
            "rename the client's tool",
        ),
        // It is the turn's tool-call limit: within buddy's range, never above the server's.
        (
            json!({"input": "hi", "max_tool_calls": 0}),
            "max_tool_calls",
        ),
        (
            json!({"input": "hi", "max_tool_calls": 1000}),
            "this server's limit",
        ),
    ] {
        let (status, error) = respond(&state, body.clone(), ALICE).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {error}");
        assert!(
            error["error"]["message"].as_str().unwrap().contains(words),
            "{body}: {error}"
        );
    }
}

#[tokio::test]
async fn item_references_find_only_the_keys_own_items() {
    let state = state();
    let ask = json!({"model": "model-a", "input": "find it"});
    let (_, alice) = respond(&state, ask.clone(), ALICE).await;
    let (_, bob) = respond(&state, ask, BOB).await;
    let id_of =
        |response: &Value, i: usize| response["output"][i]["id"].as_str().unwrap().to_owned();
    let (alice_call, bob_call) = (id_of(&alice, 0), id_of(&bob, 0));
    // The same model call ids in both turns; the items' ids are the responses' own.
    assert_ne!(alice_call, bob_call);
    assert!(alice_call.contains(alice["id"].as_str().unwrap().trim_start_matches("resp_")));
    let with_reference = |id: &str| {
        json!({"model": "model-a", "input": [
            {"role": "user", "content": "find it"},
            {"type": "item_reference", "id": id},
            {"role": "user", "content": "and again"},
        ]})
    };
    // Bob cannot read Alice's call or its result, by her id or by the model's.
    for id in [alice_call.as_str(), "mcp_call_1_0"] {
        let (status, refused) = respond(&state, with_reference(id), BOB).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
        assert!(
            refused.to_string().contains("is not known here"),
            "{refused}"
        );
    }
    // Each finds their own, and Bob's items did not overwrite Alice's.
    for (key, id) in [(ALICE, &alice_call), (BOB, &bob_call)] {
        let (status, answer) = respond(&state, with_reference(id), key).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    let message = id_of(&alice, 1);
    let (status, _) = respond(&state, with_reference(&message), BOB).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// A model server that fails every call.
struct Broken;

impl buddy_server::Backend for Broken {
    fn models(&self) -> Vec<String> {
        vec!["broken".into()]
    }

    fn resolve(
        &self,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<buddy_server::Resolved, buddy_server::BackendError> {
        let provider = buddy_testkit::ReplyProvider::new(|_, _| {
            Err(buddy_core::ProviderError::Stream {
                provider: "broken".into(),
                url: "http://127.0.0.1:9/v1".into(),
                message: "the model server broke off".into(),
                retryable: false,
            })
        });
        Ok(buddy_server::Resolved {
            provider: Arc::new(provider),
            toolbox: Arc::new(buddy_testkit::TestToolbox::new()),
            model: "broken".into(),
            policy: buddy_engine::PolicyPatch::default(),
            system: None,
            clock: None,
        })
    }
}

#[tokio::test]
async fn a_failing_stream_sends_an_error_event_then_response_failed_and_codes_are_strings() {
    let state = AppState::new(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(Broken),
        PolicyConfig::default(),
        ServerSettings::default(),
    );
    let (status, body) = send(
        &state,
        post(
            "/v1/responses",
            json!({"input": "hi", "stream": true}),
            None,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let events = events(body.trim_end_matches("data: [DONE]\n\n"));
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    let n = kinds.len();
    assert_eq!(&kinds[n - 2..], ["error", "response.failed"], "{kinds:?}");
    let (_, error) = &events[n - 2];
    assert_eq!(error["error"]["code"], "provider_error");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("broke off")
    );
    let (_, failed) = &events[n - 1];
    assert_eq!(failed["response"]["status"], "failed");
    // The response's code is one of OpenAI's (a closed list); buddy's reason is beside it.
    assert_eq!(failed["response"]["error"]["code"], "server_error");
    assert_eq!(failed["response"]["buddy"]["stop_reason"], "provider_error");
    assert_eq!(
        error["code"], "provider_error",
        "the event's own fields, as OpenAI's"
    );
    assert!(failed["response"]["completed_at"].is_u64());
    assert!(failed["sequence_number"].as_u64() > error["sequence_number"].as_u64());
    // Not streamed: the HTTP error's code is a string too, the status beside it.
    let (status, text) = send(&state, post("/v1/responses", json!({"input": "hi"}), None)).await;
    let error: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert_eq!(error["error"]["code"], "provider_error", "{error}");
    assert_eq!(error["error"]["status"], 502);
    let (status, text) = send(&state, post("/v1/responses", json!({"input": []}), None)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let error: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(error["error"]["code"], "invalid_request", "{error}");
}

#[tokio::test]
async fn a_stored_response_can_be_retrieved_listed_and_deleted_by_its_key_only() {
    let state = state();
    let (status, created) = respond(
        &state,
        json!({"model": "model-a", "input": "find it"}),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, got) = get_json(&state, format!("/v1/responses/{id}"), ALICE).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    for field in ["id", "status", "model", "usage"] {
        assert_eq!(got[field], created[field], "{field}: {got}");
    }
    // Times come from the stored turn: the same second, or the next.
    for field in ["created_at", "completed_at"] {
        let (a, b) = (
            got[field].as_u64().unwrap(),
            created[field].as_u64().unwrap(),
        );
        assert!(a.abs_diff(b) <= 1, "{field}: {a} vs {b}");
    }
    let kinds = |r: &Value| -> Vec<String> {
        r["output"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(kinds(&got), kinds(&created));
    assert_eq!(got["output"][0]["output"], "42");
    assert_eq!(got["output"][1]["content"][0]["text"], "Found it.");

    let (status, items) = get_json(&state, format!("/v1/responses/{id}/input_items"), ALICE).await;
    assert_eq!(status, StatusCode::OK, "{items}");
    assert_eq!(items["object"], "list");
    assert_eq!(items["data"][0]["role"], "user");
    assert_eq!(items["data"][0]["content"][0]["text"], "find it");

    // Another key finds nothing, as if the response never was.
    let (status, _) = get_json(&state, format!("/v1/responses/{id}"), BOB).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = get_json(&state, "/v1/responses/resp_nothing".into(), ALICE).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A finished response cannot be cancelled.
    let (status, _) = send(
        &state,
        post(
            &format!("/v1/responses/{id}/cancel"),
            json!({}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);

    let delete = |key: &'static str| {
        let state = state.clone();
        let id = id.clone();
        async move {
            let request = axum::http::Request::delete(format!("/v1/responses/{id}"))
                .header("authorization", format!("Bearer {key}"))
                .body(axum::body::Body::empty())
                .unwrap();
            let (status, text) = send(&state, request).await;
            (
                status,
                serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
            )
        }
    };
    assert_eq!(delete(BOB).await.0, StatusCode::NOT_FOUND);
    let (status, deleted) = delete(ALICE).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        deleted,
        json!({"id": id, "object": "response", "deleted": true})
    );
    let (status, _) = get_json(&state, format!("/v1/responses/{id}"), ALICE).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_conversations_api_creates_lists_and_continues_a_keys_conversation() {
    let state = state();
    let (status, created) = send(
        &state,
        post(
            "/v1/conversations",
            json!({"items": [{"type": "message", "role": "user", "content": "My name is Ada."},
                             {"type": "message", "role": "assistant", "content": "Hello Ada."}]}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let created: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(created["object"], "conversation");
    let id = created["id"].as_str().unwrap().to_owned();

    // A response in that conversation: it sees the items, and joins them.
    let (status, response) = respond(
        &state,
        json!({"model": "model-a", "conversation": id, "input": "find it"}),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{response}");
    let (status, items) = get_json(
        &state,
        format!("/v1/conversations/{id}/items?order=asc"),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{items}");
    let kinds: Vec<String> = items["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{}:{}",
                i["type"].as_str().unwrap(),
                i["role"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "message:user",
            "message:assistant",
            "message:user",
            "function_call:",
            "function_call_output:",
            "message:assistant"
        ],
        "{items}"
    );
    let (_, newest_first) = get_json(
        &state,
        format!("/v1/conversations/{id}/items?limit=1"),
        ALICE,
    )
    .await;
    assert_eq!(newest_first["data"][0]["content"][0]["text"], "Found it.");
    assert_eq!(newest_first["has_more"], true);
    let (status, object) = get_json(&state, format!("/v1/conversations/{id}"), ALICE).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(object["object"], "conversation");
    assert!(object["created_at"].is_i64());
    items_added_by_hand_stay_with_their_key(&state, &id).await;
    conversation_metadata_is_kept_and_checked(&state).await;
}

/// Part of `the_conversations_api_creates_lists_and_continues_a_keys_conversation`.
async fn items_added_by_hand_stay_with_their_key(state: &AppState, id: &str) {
    let id = id.to_owned();
    // Items added by hand, then the key boundary: another key finds nothing.
    let (status, added) = send(
        state,
        post(
            &format!("/v1/conversations/{id}/items"),
            json!({"items": [{"type": "message", "role": "user", "content": "One more thing."}]}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{added}");
    let (status, _) = get_json(state, format!("/v1/conversations/{id}/items"), BOB).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, refused) = respond(
        state,
        json!({"model": "model-a", "conversation": id, "input": "mine now"}),
        BOB,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
}

/// Part of `the_conversations_api_creates_lists_and_continues_a_keys_conversation`.
async fn conversation_metadata_is_kept_and_checked(state: &AppState) {
    // Metadata is kept, shown, replaced by POST /v1/conversations/{id}, kept through new
    // settings; one OpenAI would refuse is refused, naming what is wrong.
    let (status, text) = send(
        state,
        post(
            "/v1/conversations",
            json!({"metadata": {"topic": "x"}}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let tagged: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(tagged["metadata"], json!({"topic": "x"}));
    let tagged_id = tagged["id"].as_str().unwrap();
    let (status, text) = send(
        state,
        post(
            &format!("/v1/conversations/{tagged_id}"),
            json!({"metadata": {"topic": "y", "owner": "ada"}}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let updated: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(updated["metadata"], json!({"topic": "y", "owner": "ada"}));
    let patch = axum::http::Request::patch(format!("/v1/conversations/{tagged_id}"))
        .header("authorization", format!("Bearer {ALICE}"))
        .header("content-type", "application/json")
        .body(axum::body::Body::from(
            json!({"settings": {"system": "Be brief."}}).to_string(),
        ))
        .unwrap();
    assert_eq!(send(state, patch).await.0, StatusCode::OK);
    let (_, read) = get_json(state, format!("/v1/conversations/{tagged_id}"), ALICE).await;
    assert_eq!(
        read["metadata"],
        json!({"topic": "y", "owner": "ada"}),
        "{read}"
    );
    let (status, _) = send(
        state,
        post(
            &format!("/v1/conversations/{tagged_id}"),
            json!({"metadata": {"topic": "z"}}),
            Some(BOB),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "another key's conversation");
    let (status, text) = send(
        state,
        post(
            "/v1/conversations",
            json!({"metadata": {"n": 1}}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("metadata.n"), "{text}");
}

/// `DELETE uri` as `key`, and its JSON.
async fn delete_json(state: &AppState, uri: String, key: &str) -> (StatusCode, Value) {
    let request = axum::http::Request::delete(uri)
        .header("authorization", format!("Bearer {key}"))
        .body(axum::body::Body::empty())
        .unwrap();
    let (status, text) = send(state, request).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn conversation_items_page_after_an_id_and_are_read_and_deleted_one_by_one() {
    let state = state();
    let said: Vec<Value> = (0..5)
        .map(|i| json!({"role": "user", "content": format!("note {i}")}))
        .collect();
    let (status, text) = send(
        &state,
        post("/v1/conversations", json!({"items": said}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let conv: Value = serde_json::from_str(&text).unwrap();
    let id = conv["id"].as_str().unwrap().to_owned();
    let texts = |page: &Value| -> Vec<String> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["content"][0]["text"].as_str().unwrap().to_owned())
            .collect()
    };
    // Pages of two, oldest first, each after the last id of the one before.
    let mut seen = Vec::new();
    let mut after = String::new();
    for _ in 0..4 {
        let mut uri = format!("/v1/conversations/{id}/items?order=asc&limit=2");
        if !after.is_empty() {
            uri.push_str(&format!("&after={after}"));
        }
        let (status, page) = get_json(&state, uri, ALICE).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        seen.extend(texts(&page));
        if page["has_more"] == false {
            break;
        }
        after = page["last_id"].as_str().unwrap().to_owned();
    }
    assert_eq!(
        seen,
        (0..5).map(|i| format!("note {i}")).collect::<Vec<_>>()
    );
    let (status, _) = get_json(
        &state,
        format!("/v1/conversations/{id}/items?after=item_nope"),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    one_item_is_read_then_deleted(&state, &id).await;
    deleting_a_tool_output_deletes_its_round(&state, &id).await;
}

/// Part of `conversation_items_page_after_an_id_and_are_read_and_deleted_one_by_one`.
async fn one_item_is_read_then_deleted(state: &AppState, id: &str) {
    let id = id.to_owned();
    // One item read, then deleted (the Agents SDK's pop_item): the others keep their ids.
    let (_, newest) = get_json(
        state,
        format!("/v1/conversations/{id}/items?limit=5"),
        ALICE,
    )
    .await;
    let last_id = newest["data"][0]["id"].as_str().unwrap().to_owned();
    let first_id = newest["data"][4]["id"].as_str().unwrap().to_owned();
    let (status, item) = get_json(
        state,
        format!("/v1/conversations/{id}/items/{last_id}"),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{item}");
    assert_eq!(item["content"][0]["text"], "note 4");
    let (status, _) = get_json(
        state,
        format!("/v1/conversations/{id}/items/{last_id}"),
        BOB,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another key's item is not found"
    );
    let (status, after_delete) = delete_json(
        state,
        format!("/v1/conversations/{id}/items/{last_id}"),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{after_delete}");
    assert_eq!(after_delete["object"], "conversation");
    assert_eq!(after_delete["id"], id.as_str());
    let (status, _) = get_json(
        state,
        format!("/v1/conversations/{id}/items/{last_id}"),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, first) = get_json(
        state,
        format!("/v1/conversations/{id}/items/{first_id}"),
        ALICE,
    )
    .await;
    assert_eq!(first["content"][0]["text"], "note 0");
}

/// Part of `conversation_items_page_after_an_id_and_are_read_and_deleted_one_by_one`.
async fn deleting_a_tool_output_deletes_its_round(state: &AppState, id: &str) {
    let id = id.to_owned();
    // A response added to the conversation names it.
    let (status, response) = respond(
        state,
        json!({"model": "model-a", "input": "find it", "conversation": id}),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{response}");
    assert_eq!(response["conversation"]["id"], id.as_str());
    // Deleting the output of a tool call deletes its whole round: no call is left without
    // its result.
    let (_, items) = get_json(
        state,
        format!("/v1/conversations/{id}/items?limit=20"),
        ALICE,
    )
    .await;
    let output = items["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call_output")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = delete_json(
        state,
        format!("/v1/conversations/{id}/items/{output}"),
        ALICE,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, items) = get_json(
        state,
        format!("/v1/conversations/{id}/items?limit=20"),
        ALICE,
    )
    .await;
    let kinds: Vec<&str> = items["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert!(
        !kinds.contains(&"function_call") && !kinds.contains(&"function_call_output"),
        "{kinds:?}"
    );
}
