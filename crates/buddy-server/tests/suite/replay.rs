//! Replay and fork of stored conversations over the API: the owner's key only; replay
//! changes nothing; a fork leaves the original as it was.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::sharing::{ALICE, BOB, get, open_setup, turn};
use super::{post, send};

/// A conversation of two turns (each: a lookup call, its result, an answer).
async fn two_turns(state: &buddy_server::AppState) -> (String, Value) {
    let (id, (_, done)) = turn(state, json!({"message": "find it"}), ALICE).await;
    assert_eq!(done["reason"], "completed");
    let (_, (_, done)) = turn(
        state,
        json!({"message": "and again", "conversation_id": id}),
        ALICE,
    )
    .await;
    assert_eq!(done["reason"], "completed");
    let (status, detail) = send(state, get(&format!("/v1/conversations/{id}"), ALICE)).await;
    assert_eq!(status, StatusCode::OK);
    (id, serde_json::from_str(&detail).unwrap())
}

#[tokio::test]
async fn stored_turns_replay_as_they_ran_and_show_what_a_tighter_policy_would_do() {
    let setup = open_setup();
    let state = &setup.state;
    let (id, detail) = two_turns(state).await;
    let uri = format!("/v1/conversations/{id}/replay");
    let (status, body) = send(state, post(&uri, json!({}), Some(ALICE))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    let turns = answer["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    for turn in turns {
        let replay = &turn["replay"];
        assert_eq!(replay["same_stop"], true, "{turn}");
        assert_eq!(replay["replayed"]["reason"], "completed");
        assert_eq!(replay["replayed"]["tool_calls"], 1);
        assert!(replay.get("beyond").is_none(), "{turn}");
    }
    // Two model calls were enough; with a cap of 2 the second is the reserved Finalize.
    let first = detail["turns"][0]["id"].as_str().unwrap();
    let (status, body) = send(
        state,
        post(
            &uri,
            json!({"turn": first, "policy": {"max_model_calls": 2}}),
            Some(ALICE),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    let replay = &answer["turns"][0]["replay"];
    assert_eq!(answer["turns"].as_array().unwrap().len(), 1);
    assert_eq!(replay["same_stop"], false);
    assert_eq!(replay["replayed"]["reason"], "max_model_calls");
    assert_eq!(
        replay["replayed"]["stopped_by"]["guard"],
        "model_call_limit"
    );
    assert_eq!(replay["beyond"]["wanted"], "final_answer");
    assert_eq!(replay["policy"]["max_model_calls"], 2);
    // Replay changed nothing.
    let (_, after) = send(state, get(&format!("/v1/conversations/{id}"), ALICE)).await;
    assert_eq!(serde_json::from_str::<Value>(&after).unwrap(), detail);
}

#[tokio::test]
async fn replay_is_the_owners_and_refuses_what_it_cannot_do() {
    let setup = open_setup();
    let state = &setup.state;
    let (id, _) = two_turns(state).await;
    let uri = format!("/v1/conversations/{id}/replay");
    let (status, _) = send(state, post(&uri, json!({}), Some(BOB))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "another key's conversation");
    let (status, body) = send(state, post(&uri, json!({"turn": "turn_nope"}), Some(ALICE))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("no turn `turn_nope`"), "{body}");
    let (status, body) = send(
        state,
        post(&uri, json!({"policy": {"max_model_calls": 0}}), Some(ALICE)),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("max_model_calls"), "{body}");
    let (status, body) = send(state, post(&uri, json!({"polcy": {}}), Some(ALICE))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn a_fork_holds_the_history_before_a_message_and_the_original_is_untouched() {
    let setup = open_setup();
    let state = &setup.state;
    let (id, detail) = two_turns(state).await;
    let messages = detail["messages"].as_array().unwrap().clone();
    assert_eq!(messages[4], json!({"role": "user", "content": "and again"}));
    let uri = format!("/v1/conversations/{id}/fork");
    let (status, body) = send(state, post(&uri, json!({"before": 4}), Some(ALICE))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let fork: Value = serde_json::from_str(&body).unwrap();
    let fork_id = fork["id"].as_str().unwrap().to_owned();
    assert_ne!(fork_id, id);
    let (_, copy) = send(state, get(&format!("/v1/conversations/{fork_id}"), ALICE)).await;
    let copy: Value = serde_json::from_str(&copy).unwrap();
    assert_eq!(copy["messages"].as_array().unwrap(), &messages[..4]);
    // It records where it came from, and the turn it copied whole keeps its record (how
    // it ended, its times) under the copy's own id; each message keeps its time.
    assert_eq!(
        (fork["forked_from"].as_str(), &fork["fork_before"]),
        (Some(id.as_str()), &json!(4))
    );
    assert_eq!(
        (copy["forked_from"].as_str(), &copy["fork_before"]),
        (Some(id.as_str()), &json!(4))
    );
    let (copied, first) = (&copy["turns"][0], &detail["turns"][0]);
    assert_eq!(copy["turns"].as_array().unwrap().len(), 1);
    assert_ne!(copied["id"], first["id"]);
    for field in [
        "stop_reason",
        "started_at_ms",
        "finished_at_ms",
        "stats",
        "model",
    ] {
        assert_eq!(copied[field], first[field], "{field}");
    }
    assert!(
        copy["message_turns"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t == &copied["id"])
    );
    assert_eq!(
        copy["message_times_ms"].as_array().unwrap(),
        &detail["message_times_ms"].as_array().unwrap()[..4]
    );
    let (_, listed) = send(state, get("/v1/conversations", ALICE)).await;
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let entry = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == fork_id.as_str())
        .unwrap();
    assert_eq!(
        (entry["forked_from"].as_str(), &entry["fork_before"]),
        (Some(id.as_str()), &json!(4))
    );
    // Edit and resend: the fork goes on with another message; the original keeps its own.
    let (_, (_, done)) = turn(
        state,
        json!({"message": "and something else", "conversation_id": fork_id}),
        ALICE,
    )
    .await;
    assert_eq!(done["reason"], "completed");
    let (_, original) = send(state, get(&format!("/v1/conversations/{id}"), ALICE)).await;
    assert_eq!(serde_json::from_str::<Value>(&original).unwrap(), detail);
    let (_, copy) = send(state, get(&format!("/v1/conversations/{fork_id}"), ALICE)).await;
    let copy: Value = serde_json::from_str(&copy).unwrap();
    assert_eq!(copy["messages"][4]["content"], "and something else");
}

#[tokio::test]
async fn a_fork_inside_a_tool_round_or_past_the_end_or_of_another_key_is_refused() {
    let setup = open_setup();
    let state = &setup.state;
    let (id, detail) = two_turns(state).await;
    let len = detail["messages"].as_array().unwrap().len();
    let uri = format!("/v1/conversations/{id}/fork");
    let (status, body) = send(state, post(&uri, json!({"before": 2}), Some(ALICE))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("inside a tool round"), "{body}");
    let (status, body) = send(state, post(&uri, json!({"before": len + 1}), Some(ALICE))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains(&format!("has {len} messages")), "{body}");
    let (status, _) = send(state, post(&uri, json!({"before": 0}), Some(BOB))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = send(state, post(&uri, json!({"before": len}), Some(ALICE))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}
