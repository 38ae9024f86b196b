//! What a request can do without when even its pinned messages do not fit a small
//! window, in the order it is given up: buddy's own notes, then the details of the tool
//! definitions, then the definitions of tools the conversation never called, then part
//! of the reply's reserve. Only the request changes: the history
//! keeps everything.

use buddy_core::{Message, ToolSpec};
use serde_json::Value;

/// How much a request has shed, in the order things are given up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Shed {
    /// Nothing: the request as the history has it.
    #[default]
    Nothing,
    /// buddy's own notes are left out (a note that is the history's last message, such as
    /// the request to answer again, stays).
    Notes,
    /// And the tool definitions lose their details: each description cut to its first
    /// sentence, the descriptions and titles inside the parameter schemas removed.
    ToolDetails,
    /// And only the tools the conversation has called stay offered (the model has shown
    /// which it needs; every tool a history's call names stays defined, as the Messages
    /// API wants).
    UnusedTools,
    /// And the reply's reserve shrinks to its floor.
    Reserve,
}

impl Shed {
    /// The next thing to give up, if any is left.
    pub fn next(self) -> Option<Shed> {
        match self {
            Shed::Nothing => Some(Shed::Notes),
            Shed::Notes => Some(Shed::ToolDetails),
            Shed::ToolDetails => Some(Shed::UnusedTools),
            Shed::UnusedTools => Some(Shed::Reserve),
            Shed::Reserve => None,
        }
    }
}

/// The smallest reserve a reply keeps when the window is tight: a quarter of it, at
/// least 256 tokens (never more than it was).
pub fn reserve_floor(reserve: u64) -> u64 {
    (reserve / 4).max(256).min(reserve)
}

/// The messages (and their token counts) without buddy's notes, except a note that is
/// the last message. Returns the kept messages, their counts and how many notes went.
pub fn without_notes(messages: &[Message], counts: &[usize]) -> (Vec<Message>, Vec<usize>, usize) {
    let last = messages.len().saturating_sub(1);
    let mut kept = Vec::with_capacity(messages.len());
    let mut kept_counts = Vec::with_capacity(messages.len());
    let mut dropped = 0;
    for (i, (message, count)) in messages.iter().zip(counts).enumerate() {
        if matches!(message, Message::Note { .. }) && i != last {
            dropped += 1;
            continue;
        }
        kept.push(message.clone());
        kept_counts.push(*count);
    }
    (kept, kept_counts, dropped)
}

/// The tools of `tools` that some call in `messages` names.
pub fn called_tools(tools: &[ToolSpec], messages: &[Message]) -> Vec<ToolSpec> {
    let called: std::collections::HashSet<&str> = messages
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .map(|c| c.name.as_str())
        .collect();
    tools
        .iter()
        .filter(|t| called.contains(t.name.as_str()))
        .cloned()
        .collect()
}

/// Longest description a compacted tool keeps.
const COMPACT_DESCRIPTION_CHARS: usize = 120;

/// The tool definitions with their details removed (see [`Shed::ToolDetails`]).
pub fn compact_tools(tools: &[ToolSpec]) -> Vec<ToolSpec> {
    tools
        .iter()
        .map(|tool| ToolSpec {
            name: tool.name.clone(),
            description: first_sentence(&tool.description),
            parameters: without_details(&tool.parameters),
        })
        .collect()
}

/// The first sentence of `text`, at most [`COMPACT_DESCRIPTION_CHARS`] characters.
fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let end = text
        .find(". ")
        .map(|i| i + 1)
        .into_iter()
        .chain(text.find('\n'))
        .min()
        .unwrap_or(text.len());
    text[..end]
        .chars()
        .take(COMPACT_DESCRIPTION_CHARS)
        .collect()
}

/// A JSON Schema without the keywords `description`, `title` and `examples`, at every
/// level of subschemas. Property names are kept whatever they are (a property may be
/// called `description`), as are values (`enum`, `const`, `default`).
fn without_details(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let named = |value: &Value| match value {
        Value::Object(names) => Value::Object(
            names
                .iter()
                .map(|(name, sub)| (name.clone(), without_details(sub)))
                .collect(),
        ),
        other => other.clone(),
    };
    Value::Object(
        map.iter()
            .filter(|(k, _)| !matches!(k.as_str(), "description" | "title" | "examples"))
            .map(|(k, v)| {
                let v = match k.as_str() {
                    "properties" | "patternProperties" | "$defs" | "definitions" => named(v),
                    "items"
                    | "additionalProperties"
                    | "not"
                    | "if"
                    | "then"
                    | "else"
                    | "contains"
                    | "propertyNames" => without_details(v),
                    "allOf" | "anyOf" | "oneOf" | "prefixItems" => match v {
                        Value::Array(items) => {
                            Value::Array(items.iter().map(without_details).collect())
                        }
                        other => other.clone(),
                    },
                    _ => v.clone(),
                };
                (k.clone(), v)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shedding_goes_in_its_order_and_ends() {
        let order: Vec<Shed> = std::iter::successors(Some(Shed::Nothing), |s| s.next()).collect();
        assert_eq!(
            order,
            [
                Shed::Nothing,
                Shed::Notes,
                Shed::ToolDetails,
                Shed::UnusedTools,
                Shed::Reserve
            ]
        );
        assert_eq!(reserve_floor(512), 256);
        assert_eq!(reserve_floor(4096), 1024);
        assert_eq!(reserve_floor(100), 100);
    }

    #[test]
    fn only_the_tools_a_call_names_stay() {
        let tool = |name: &str| ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
        };
        let tools = [tool("a"), tool("b"), tool("c")];
        let messages = [
            Message::user("hi"),
            Message::Assistant {
                content: None,
                tool_calls: vec![buddy_core::ToolCall::new("1", "c", "{}")],
            },
            Message::tool_result("1", "ok", false),
        ];
        let kept: Vec<String> = called_tools(&tools, &messages)
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(kept, ["c"]);
        assert!(called_tools(&tools, &messages[..1]).is_empty());
    }

    #[test]
    fn notes_go_but_a_last_note_stays() {
        let messages = vec![
            Message::user("hi"),
            Message::note("[system note] 3 of 6 model calls left"),
            Message::assistant(""),
            Message::note("[system note] The last reply was empty."),
        ];
        let (kept, counts, dropped) = without_notes(&messages, &[1, 2, 3, 4]);
        assert_eq!(dropped, 1);
        assert_eq!(counts, [1, 3, 4]);
        assert_eq!(kept.last(), messages.last());
    }

    #[test]
    fn compact_tools_keep_names_types_and_required_fields() {
        let tool = ToolSpec {
            name: "read_file".into(),
            description:
                "Read a text file in the sandbox. Paths are relative to the sandbox root; \
                          binary files are refused."
                    .into(),
            parameters: json!({"type": "object", "title": "Args", "properties": {
                "path": {"type": "string", "description": "Relative path of the file."},
                "max_bytes": {"type": "integer", "description": "Read at most this many bytes.", "examples": [1024]}},
                "required": ["path"]}),
        };
        let compact = &compact_tools(&[tool])[0];
        assert_eq!(compact.description, "Read a text file in the sandbox.");
        let named = ToolSpec {
            name: "t".into(),
            description: String::new(),
            parameters: json!({"type": "object", "properties": {"description": {"type": "string", "description": "x"}}}),
        };
        assert_eq!(
            compact_tools(&[named])[0].parameters,
            json!({"type": "object", "properties": {"description": {"type": "string"}}}),
            "a property called description stays"
        );
        assert_eq!(
            compact.parameters,
            json!({"type": "object", "properties": {"path": {"type": "string"}, "max_bytes": {"type": "integer"}},
                   "required": ["path"]})
        );
    }
}
