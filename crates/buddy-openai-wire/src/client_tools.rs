//! A Responses request's `tools` as codex sends them: `function` tools, `namespace` tools
//! (functions grouped under a name, offered to the model flat and handed back with their
//! `namespace`), `custom` (free-form) tools (offered as a function of one string, handed
//! back as `custom_tool_call` items), and hosted tools (`web_search`, `file_search`,
//! `code_interpreter`, `local_shell`, …) that only OpenAI's own servers run: those are
//! left out and named, never a refusal that stops the client.

use std::collections::HashMap;

use buddy_core::ToolCall;
use serde_json::{Value, json};

use super::responses::{CustomToolCallItem, FunctionCallItem, FunctionTool, Item, ItemStatus};

/// What a client tool offered under a name is on the client's side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientKind {
    /// A plain function.
    Function,
    /// Function `name` of namespace `namespace`.
    Namespaced { namespace: String, name: String },
    /// A custom tool: the model writes its free-form input as `{"input": "…"}`.
    Custom,
}

/// The request's tools: those offered to the model (by the name it calls them) and how
/// to hand a call back; the hosted ones left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientTools {
    pub offered: Vec<FunctionTool>,
    pub kinds: HashMap<String, ClientKind>,
    /// Hosted tools buddy's model servers cannot run, by type.
    pub left_out: Vec<String>,
}

/// The name a namespaced function is offered under: its namespace and name joined by
/// `__` (a namespace that already ends in `_` is joined as it is, as codex's MCP
/// namespaces `mcp__server__` are).
pub fn offered_name(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        None => name.to_owned(),
        Some(ns) if ns.ends_with('_') => format!("{ns}{name}"),
        Some(ns) => format!("{ns}__{name}"),
    }
}

impl ClientTools {
    /// The output item for a call of one of these tools (`id` its item id).
    pub fn output_item(&self, id: String, call: ToolCall) -> Item {
        match self.kinds.get(&call.name) {
            Some(ClientKind::Namespaced { namespace, name }) => {
                Item::FunctionCall(FunctionCallItem {
                    id: Some(id),
                    call_id: call.id,
                    name: name.clone(),
                    namespace: Some(namespace.clone()),
                    arguments: call.arguments,
                    status: Some(ItemStatus::Completed),
                })
            }
            Some(ClientKind::Custom) => {
                let input = serde_json::from_str::<Value>(call.arguments.as_str())
                    .ok()
                    .and_then(|v| v.get("input").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_else(|| call.arguments.as_str().to_owned());
                Item::CustomToolCall(CustomToolCallItem {
                    id: Some(id),
                    call_id: call.id,
                    name: call.name,
                    input,
                    status: Some(ItemStatus::Completed),
                })
            }
            _ => Item::FunctionCall(FunctionCallItem {
                id: Some(id),
                call_id: call.id,
                name: call.name,
                namespace: None,
                arguments: call.arguments,
                status: Some(ItemStatus::Completed),
            }),
        }
    }
}

/// The request's `tools`, or what is wrong with one of them (by index).
pub fn client_tools(tools: Vec<Value>) -> Result<ClientTools, String> {
    let mut out = ClientTools::default();
    for (i, tool) in tools.into_iter().enumerate() {
        let kind = tool
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match kind.as_str() {
            "function" => {
                let function = function(&format!("tools[{i}]"), tool)?;
                out.kinds
                    .insert(function.name.clone(), ClientKind::Function);
                out.offered.push(function);
            }
            "namespace" => namespace(i, tool, &mut out)?,
            "custom" => {
                let name = tool
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("tools[{i}]: a custom tool needs `name`"))?
                    .to_owned();
                let description = tool.get("description").and_then(Value::as_str);
                let format = tool.get("format").map(Value::to_string);
                let described = match (description, format) {
                    (Some(d), Some(f)) => format!("{d}\n\nInput format: {f}"),
                    (Some(d), None) => d.to_owned(),
                    (None, Some(f)) => format!("Input format: {f}"),
                    (None, None) => String::new(),
                };
                out.kinds.insert(name.clone(), ClientKind::Custom);
                out.offered.push(FunctionTool {
                    name,
                    description: Some(described),
                    parameters: Some(json!({"type": "object",
                        "properties": {"input": {"type": "string", "description": "The tool's free-form input"}},
                        "required": ["input"]})),
                    strict: None,
                });
            }
            "" => return Err(format!("tools[{i}]: a tool needs a `type`")),
            hosted => out.left_out.push(hosted.to_owned()),
        }
    }
    Ok(out)
}

/// A `namespace` tool's functions, offered flat.
fn namespace(i: usize, tool: Value, out: &mut ClientTools) -> Result<(), String> {
    let ns = tool
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("tools[{i}]: a namespace tool needs `name`"))?
        .to_owned();
    let members = match tool.get("tools") {
        Some(Value::Array(members)) => members.clone(),
        _ => {
            return Err(format!(
                "tools[{i}]: a namespace tool needs `tools`, a list"
            ));
        }
    };
    for (j, member) in members.into_iter().enumerate() {
        let at = format!("tools[{i}].tools[{j}]");
        if member.get("type").and_then(Value::as_str) != Some("function") {
            return Err(format!("{at}: a namespace holds function tools"));
        }
        let mut function = function(&at, member)?;
        let inner = std::mem::take(&mut function.name);
        function.name = offered_name(Some(&ns), &inner);
        out.kinds.insert(
            function.name.clone(),
            ClientKind::Namespaced {
                namespace: ns.clone(),
                name: inner,
            },
        );
        out.offered.push(function);
    }
    Ok(())
}

fn function(at: &str, tool: Value) -> Result<FunctionTool, String> {
    serde_json::from_value(tool).map_err(|e| {
        let e = e.to_string();
        match e.strip_prefix("missing field ") {
            Some(field) => format!("{at}: a function tool needs {field}"),
            None => format!("{at}: {e}"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codexs_tools_are_offered_flat_and_hosted_ones_left_out() {
        let tools = client_tools(vec![
            json!({"type": "function", "name": "shell", "parameters": {"type": "object"}}),
            json!({"type": "namespace", "name": "multi_agent_v1", "description": "agents",
                   "tools": [{"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}},
                             {"type": "function", "name": "wait", "parameters": {"type": "object"}}]}),
            json!({"type": "namespace", "name": "mcp__docs__",
                   "tools": [{"type": "function", "name": "search"}]}),
            json!({"type": "custom", "name": "apply_patch", "description": "Patch files",
                   "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}}),
            json!({"type": "web_search", "external_web_access": true}),
            json!({"type": "local_shell"}),
        ])
        .unwrap();
        let names: Vec<&str> = tools.offered.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "shell",
                "multi_agent_v1__spawn_agent",
                "multi_agent_v1__wait",
                "mcp__docs__search",
                "apply_patch"
            ]
        );
        assert_eq!(tools.left_out, ["web_search", "local_shell"]);
        assert!(
            tools.offered[4]
                .description
                .as_deref()
                .unwrap()
                .contains("lark")
        );
        // Calls go back under the names the client resolves.
        let spawn = ToolCall::new("c1", "multi_agent_v1__spawn_agent", "{}");
        let item = serde_json::to_value(tools.output_item("fc_1".into(), spawn)).unwrap();
        assert_eq!(
            (&item["type"], &item["name"], &item["namespace"]),
            (
                &json!("function_call"),
                &json!("spawn_agent"),
                &json!("multi_agent_v1")
            )
        );
        let patch = ToolCall::new("c2", "apply_patch", r#"{"input":"*** Begin Patch"}"#);
        let item = serde_json::to_value(tools.output_item("ctc_1".into(), patch)).unwrap();
        assert_eq!(
            item,
            json!({"type": "custom_tool_call", "id": "ctc_1", "call_id": "c2", "name": "apply_patch",
                   "input": "*** Begin Patch", "status": "completed"})
        );
        let plain = ToolCall::new("c3", "shell", "{}");
        let item = serde_json::to_value(tools.output_item("fc_2".into(), plain)).unwrap();
        assert!(item.get("namespace").is_none());
    }

    #[test]
    fn malformed_tools_are_named_by_index() {
        let err = |tool: Value| client_tools(vec![tool]).unwrap_err();
        assert_eq!(err(json!({"name": "x"})), "tools[0]: a tool needs a `type`");
        assert!(err(json!({"type": "namespace", "name": "n"})).contains("needs `tools`"));
        assert!(
            err(json!({"type": "namespace", "name": "n", "tools": [{"type": "custom", "name": "c"}]}))
                .contains("tools[0].tools[0]: a namespace holds function tools")
        );
        assert!(err(json!({"type": "function"})).contains("needs `name`"));
        assert!(err(json!({"type": "custom"})).contains("needs `name`"));
    }
}
