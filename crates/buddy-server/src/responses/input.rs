//! A request's `input` as buddy's messages: items of both OpenAI APIs, references to
//! items this process produced, and compaction items.

use buddy_core::Message;
use buddy_openai_wire::responses::{Item, input_items, items_to_messages};
use serde_json::Value;

use super::compaction_item;
use crate::item_cache::ItemCache;

/// buddy's messages for `input` (references resolved among `owner`'s items in `kept`),
/// or what is wrong with an item.
pub(crate) fn input_messages(
    kept: &ItemCache,
    owner: &str,
    input: Value,
) -> Result<Vec<Message>, String> {
    let mut items = input_items(input)?;
    for (i, item) in items.iter_mut().enumerate() {
        if let Item::ItemReference(reference) = item {
            *item = kept.get(owner, &reference.id).ok_or_else(|| {
                format!(
                    "input[{i}]: item `{}` is not known here (items are kept a while by the instance that made them); send the item itself",
                    reference.id
                )
            })?;
        }
    }
    items_to_messages(items, compaction_item::decode)
}

#[cfg(test)]
mod tests {
    use buddy_openai_wire::responses::{ItemStatus, MessageItem, OutputText};
    use serde_json::json;

    use super::*;

    #[test]
    fn input_items_become_messages_and_references_resolve_per_owner() {
        let kept = ItemCache::default();
        let messages = input_messages(&kept, "alice", json!([
            {"role": "user", "content": [{"type": "input_text", "text": "Who is Ada?"}]},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "lookup", "arguments": "{\"x\":1}"},
            {"type": "function_call_output", "call_id": "c1", "output": "a mathematician"},
            {"type": "function_call_output", "call_id": "c2", "output": "a countess"},
            {"type": "reasoning", "summary": []},
        ]))
        .unwrap();
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(
            matches!(&messages[1], Message::Assistant { tool_calls, .. } if tool_calls.len() == 2)
        );
        let unknown = json!([{"type": "item_reference", "id": "x"}]);
        assert!(input_messages(&kept, "alice", unknown).is_err());
        kept.remember(
            "alice",
            &Item::Message(MessageItem::assistant(
                "msg_known".into(),
                ItemStatus::Completed,
                vec![OutputText::new("Looking.")],
            )),
        );
        let with_reference = json!([
            {"role": "user", "content": "hi"},
            {"type": "item_reference", "id": "msg_known"},
            {"type": "function_call", "call_id": "c9", "name": "lookup", "arguments": "{}"},
        ]);
        // Another owner does not find it.
        assert!(input_messages(&kept, "bob", with_reference.clone()).is_err());
        let resolved = input_messages(&kept, "alice", with_reference).unwrap();
        assert!(
            matches!(&resolved[1], Message::Assistant { content: Some(text), tool_calls } if text == "Looking." && tool_calls.len() == 1),
            "{resolved:?}"
        );
        assert_eq!(
            input_messages(&kept, "alice", json!("hi")).unwrap(),
            vec![Message::user("hi")]
        );
    }
}
