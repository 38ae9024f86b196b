//! Tool calls and tool definitions, the same on both sides of the Chat Completions wire:
//! read (owned) from a client's request, written (borrowed from buddy's history) into a
//! request to a provider.

use std::borrow::Cow;

use buddy_core::ToolSpec;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A tool call in an assistant message.
#[derive(Deserialize, Serialize)]
pub struct WireToolCall<'a> {
    pub id: Cow<'a, str>,
    #[serde(rename = "type", default = "function")]
    pub kind: Cow<'a, str>,
    pub function: WireFunction<'a>,
}

/// The function of a tool call: its name and arguments (a JSON text).
#[derive(Deserialize, Serialize)]
pub struct WireFunction<'a> {
    pub name: Cow<'a, str>,
    #[serde(default)]
    pub arguments: Cow<'a, str>,
}

/// A tool the caller declares.
#[derive(Deserialize, Serialize)]
pub struct WireTool<'a> {
    #[serde(rename = "type", default = "function")]
    pub kind: Cow<'a, str>,
    pub function: WireToolDef<'a>,
}

/// A declared tool's definition.
#[derive(Deserialize, Serialize)]
pub struct WireToolDef<'a> {
    pub name: Cow<'a, str>,
    #[serde(default)]
    pub description: Cow<'a, str>,
    #[serde(default = "empty_object")]
    pub parameters: Cow<'a, Value>,
}

impl<'a> WireToolCall<'a> {
    /// A `function` call borrowing its parts.
    pub fn function(id: &'a str, name: &'a str, arguments: &'a str) -> Self {
        WireToolCall {
            id: Cow::Borrowed(id),
            kind: function(),
            function: WireFunction {
                name: Cow::Borrowed(name),
                arguments: Cow::Borrowed(arguments),
            },
        }
    }
}

impl<'a> WireTool<'a> {
    /// A `function` tool borrowing its definition.
    pub fn function(spec: &'a ToolSpec) -> Self {
        WireTool {
            kind: function(),
            function: WireToolDef {
                name: Cow::Borrowed(&spec.name),
                description: Cow::Borrowed(&spec.description),
                parameters: Cow::Borrowed(&spec.parameters),
            },
        }
    }
}

fn function<'a>() -> Cow<'a, str> {
    Cow::Borrowed("function")
}

fn empty_object<'a>() -> Cow<'a, Value> {
    Cow::Owned(json!({"type": "object", "properties": {}}))
}

impl From<WireTool<'_>> for ToolSpec {
    fn from(tool: WireTool<'_>) -> Self {
        ToolSpec {
            name: tool.function.name.into_owned(),
            description: tool.function.description.into_owned(),
            parameters: tool.function.parameters.into_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_reads_back_as_it_was_written() {
        let spec = ToolSpec {
            name: "lookup".into(),
            description: "Finds a word.".into(),
            parameters: json!({"type": "object"}),
        };
        let text = serde_json::to_string(&WireTool::function(&spec)).unwrap();
        assert_eq!(
            text,
            r#"{"type":"function","function":{"name":"lookup","description":"Finds a word.","parameters":{"type":"object"}}}"#
        );
        let read: WireTool<'static> = serde_json::from_str(&text).unwrap();
        assert_eq!(ToolSpec::from(read), spec);
        let bare: WireTool<'static> = serde_json::from_str(r#"{"function":{"name":"x"}}"#).unwrap();
        assert_eq!(bare.function.parameters["type"], "object");
        let call = WireToolCall::function("c1", "lookup", "{}");
        assert_eq!(
            serde_json::to_string(&call).unwrap(),
            r#"{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{}"}}"#
        );
    }
}
