use super::*;
use buddy_core::ToolCall;
use serde_json::json;

fn one(text: &str) -> LoggedRun {
    let mut runs = read_runs(text, "logs/runs.jsonl");
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.remove(0).unwrap()
}

#[test]
fn a_json_array_of_openai_messages_is_one_run() {
    let text = json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Time?"}]},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
        {"role": "assistant", "content": "It is noon."}
    ])
    .to_string();
    let run = one(&text);
    assert_eq!(run.id, "logs/runs.jsonl");
    assert_eq!(run.source, "runs");
    assert_eq!(run.success, None);
    assert_eq!(
        run.messages,
        vec![
            Message::system("Be brief."),
            Message::user("Time?"),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall::new("c1", "get_time", "{}")]
            },
            Message::tool_result("c1", "12:00", false),
            Message::assistant("It is noon."),
        ]
    );
}

#[test]
fn jsonl_lines_are_runs_with_their_labels_and_bad_lines_are_named() {
    let text = [
        json!({"id": "a", "success": true, "messages": [{"role": "user", "content": "hi"}]})
            .to_string(),
        String::new(),
        "{not json".to_owned(),
        json!({"reward": 0.0, "traj": [{"role": "user", "content": "x"}], "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]})
        .to_string(),
        json!({"messages": [{"role": "robot", "content": "x"}]}).to_string(),
    ]
    .join("\n");
    let runs = read_runs(&text, "r.jsonl");
    assert_eq!(runs.len(), 4);
    let first = runs[0].as_ref().unwrap();
    assert_eq!((first.id.as_str(), first.success), ("a", Some(true)));
    assert_eq!(runs[1].as_ref().unwrap_err().place, "r.jsonl:3");
    let fourth = runs[2].as_ref().unwrap();
    assert_eq!(
        (fourth.id.as_str(), fourth.success),
        ("r.jsonl:4", Some(false))
    );
    assert_eq!(fourth.tools[0].name, "f");
    assert!(
        runs[3]
            .as_ref()
            .unwrap_err()
            .message
            .contains("unknown role `robot`")
    );
}

#[test]
fn langchain_dicts_and_flat_calls_with_object_arguments_are_read() {
    let text = json!([
        {"type": "human", "data": {"content": "weather?"}},
        {"type": "ai", "data": {"content": "", "tool_calls": [
            {"name": "weather", "args": {"city": "Paris"}, "id": "t1", "type": "tool_call"}]}},
        {"type": "tool", "data": {"content": "boom", "tool_call_id": "t1", "status": "error"}},
        {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
         "kwargs": {"content": "It failed."}}
    ])
    .to_string();
    let run = one(&text);
    assert_eq!(
        run.messages,
        vec![
            Message::user("weather?"),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall::new("t1", "weather", r#"{"city":"Paris"}"#)]
            },
            Message::tool_result("t1", "boom", true),
            Message::assistant("It failed."),
        ]
    );
}

#[test]
fn anthropic_blocks_and_legacy_function_calls_become_calls_and_results() {
    let text = json!({"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "tu1", "name": "ls", "input": {"path": "."}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "a.txt"}]},
        {"role": "assistant", "content": null, "function_call": {"name": "cat", "arguments": "{\"f\":1}"}},
        {"role": "function", "name": "cat", "content": "data"}
    ], "solved": "yes"})
    .to_string();
    let run = one(&text);
    assert_eq!(run.success, Some(true));
    assert_eq!(
        run.messages[1..],
        [
            Message::Assistant {
                content: Some("Looking.".into()),
                tool_calls: vec![ToolCall::new("tu1", "ls", r#"{"path":"."}"#)]
            },
            Message::tool_result("tu1", "a.txt", false),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall::new("function_call_1", "cat", r#"{"f":1}"#)]
            },
            Message::tool_result("function_call_1", "data", false),
        ]
    );
}

#[test]
fn buddys_own_stored_conversation_reads_back_as_it_was() {
    let messages = vec![
        Message::system("Be brief."),
        Message::user("Time?"),
        Message::Assistant {
            content: Some("Checking.".into()),
            tool_calls: vec![ToolCall::new("c1", "get_time", r#"{"tz":"UTC"}"#)],
        },
        Message::tool_result("c1", "boom", true),
        Message::note("[system note] 3 of 6 model calls left"),
        Message::assistant("It failed."),
    ];
    // As `GET /v1/conversations/{id}` gives it: buddy's messages under `messages`.
    let text = json!({"id": "conv_1", "title": "t", "messages": messages}).to_string();
    let run = one(&text);
    assert_eq!(run.id, "conv_1");
    assert_eq!(run.messages, messages);
}

#[test]
fn an_array_of_conversations_and_a_request_log_are_read() {
    let text = json!([
        [{"role": "user", "content": "a"}],
        {"request": {"model": "gpt-4o", "messages": [{"role": "user", "content": "b"}]},
         "response": {"choices": [{"message": {"role": "assistant", "content": "B"}}]}},
        7
    ])
    .to_string();
    let runs = read_runs(&text, "x.json");
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[0].as_ref().unwrap().id, "x.json#1");
    let logged = runs[1].as_ref().unwrap();
    assert_eq!(logged.model.as_deref(), Some("gpt-4o"));
    assert_eq!(logged.messages[1], Message::assistant("B"));
    assert!(runs[2].is_err());
    assert!(read_runs("  ", "e.json")[0].is_err());
}

#[test]
fn a_tree_of_runs_is_read_as_one_run_per_agent_each_named_by_its_path() {
    let user = |text: &str| json!([{"role": "user", "content": text}]);
    let text = json!({
        "id": "t1", "success": true, "messages": user("top"),
        "subagents": [
            {"agent": "researcher", "messages": user("child"),
             "subagents": [{"id": "deep", "success": false, "messages": user("grandchild")}]},
            [{"role": "user", "content": "second child"}]
        ],
        "agents": ["a name, not a run"]
    })
    .to_string();
    let runs: Vec<LoggedRun> = read_runs(&text, "tree.json")
        .into_iter()
        .map(|r| r.expect("readable"))
        .collect();
    let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["t1", "t1>researcher", "t1>researcher>deep", "t1>#2"]);
    let success: Vec<Option<bool>> = runs.iter().map(|r| r.success).collect();
    assert_eq!(success, [Some(true), Some(true), Some(false), Some(true)]);
    assert_eq!(runs[2].messages, vec![Message::user("grandchild")]);
}
