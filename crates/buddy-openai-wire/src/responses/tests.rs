//! Tests of the Responses API types.

use buddy_core::Message;
use serde_json::json;

use super::*;

#[test]
fn items_read_as_written_and_name_what_they_lack() {
    let call = Item::SkillCall(SkillCallItem {
        id: "mcp_1".into(),
        call_id: Some("c1".into()),
        server_label: None,
        name: "lookup".into(),
        arguments: "{}".into(),
        output: Some("found".into()),
        error: None,
        status: Some(ItemStatus::Completed),
    });
    let written = serde_json::to_value(&call).unwrap();
    assert_eq!(written["type"], "buddy:skill_call");
    assert!(written["error"].is_null() && written.get("server_label").is_none());
    assert_eq!(input_items(json!([written])).unwrap(), vec![call]);

    let missing = input_items(json!([{"type": "function_call", "name": "f", "arguments": ""}]));
    assert_eq!(
        missing.unwrap_err(),
        "input[0]: a `function_call` item needs `call_id`"
    );
    let unknown = input_items(json!([{"type": "web_search_call"}])).unwrap_err();
    assert!(
        unknown.contains("`web_search_call` are not supported"),
        "{unknown}"
    );
    assert!(
        input_items(json!([7]))
            .unwrap_err()
            .contains("must be an object")
    );
    let untyped = input_items(json!([{"role": "user", "content": "hi"}])).unwrap();
    let messages = items_to_messages(untyped, |_| Err("none".into())).unwrap();
    assert_eq!(messages, vec![Message::user("hi")]);
}

#[test]
fn a_response_and_its_events_are_in_the_apis_shapes() {
    let item = Item::Message(MessageItem {
        phase: Some(Phase::FinalAnswer),
        ..MessageItem::assistant(
            "msg_1".into(),
            ItemStatus::Completed,
            vec![OutputText::new("hi")],
        )
    });
    let event = serde_json::to_value(StreamEvent::OutputItemDone {
        output_index: 0,
        item,
    })
    .unwrap();
    assert_eq!(
        event,
        json!({"type": "response.output_item.done", "output_index": 0, "item": {
            "type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
            "phase": "final_answer",
            "content": [{"type": "output_text", "text": "hi", "annotations": [], "logprobs": []}]}})
    );
    let tools = crate::client_tools::client_tools(vec![json!({"type": "function", "name": "f"})])
        .unwrap()
        .offered;
    assert_eq!(
        serde_json::to_value(&tools[0]).unwrap(),
        json!({"type": "function", "name": "f", "description": null, "parameters": null, "strict": null})
    );
}
