//! Reading recorded conversations for `buddy judge`, as the tools people use log them:
//! OpenAI Chat Completions messages (a JSON array, an object with `messages`, or JSONL
//! with one conversation per line, as the OpenAI SDKs and fine-tuning files have them),
//! LangChain's message dicts (`{"type": "ai", "data": {…}}`, or its serialised
//! constructors), buddy's own stored messages, and Anthropic-style content blocks
//! (`tool_use` / `tool_result`). Lenient where logs differ (arguments as an object, a
//! missing call id, content as a list of parts); a conversation that cannot be read is
//! reported with its place and skipped, never guessed.

use buddy_core::{Message, ToolCall, ToolSpec};
use serde_json::{Map, Value};

/// One recorded run to judge.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedRun {
    /// The run's `id`, else its place (`file:line` or `file#n`).
    pub id: String,
    /// The run's `source`, else the file's name.
    pub source: String,
    /// Whether the run solved its task, when the log says.
    pub success: Option<bool>,
    pub model: Option<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
}

/// A conversation that could not be read, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{place}: {message}")]
pub struct InputError {
    pub place: String,
    pub message: String,
}

/// Every run in `text` (the contents of the file named `label`), in order; each one that
/// cannot be read is an error naming its place.
pub fn read_runs(text: &str, label: &str) -> Vec<Result<LoggedRun, InputError>> {
    let source = file_stem(label);
    let fail = |place: String, message: String| InputError { place, message };
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return vec![Err(fail(label.to_owned(), "the file is empty".to_owned()))];
    }
    // One JSON document: a conversation, or an array of conversations.
    if trimmed.starts_with(['[', '{'])
        && let Ok(value) = serde_json::from_str::<Value>(text)
    {
        return match value {
            Value::Array(items) if items.first().is_some_and(is_message) => {
                tree_of(Value::Array(items), label.to_owned(), &source)
            }
            Value::Array(items) => items
                .into_iter()
                .enumerate()
                .flat_map(|(i, item)| tree_of(item, format!("{label}#{}", i + 1), &source))
                .collect(),
            other => tree_of(other, label.to_owned(), &source),
        };
    }
    // JSONL: one conversation per line.
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .flat_map(|(n, line)| {
            let place = format!("{label}:{}", n + 1);
            match serde_json::from_str::<Value>(line) {
                Ok(value) => tree_of(value, place, &source),
                Err(e) => vec![Err(fail(
                    place,
                    format!(
                        "not JSON ({e}); write one conversation per line, or one JSON document"
                    ),
                ))],
            }
        })
        .collect()
}

/// The name of `label` without folders and extension.
fn file_stem(label: &str) -> String {
    std::path::Path::new(label)
        .file_stem()
        .map_or_else(|| label.to_owned(), |s| s.to_string_lossy().into_owned())
}

/// True for a value that is one message rather than a conversation.
fn is_message(value: &Value) -> bool {
    let Some(object) = value.as_object() else {
        return false;
    };
    object.contains_key("role")
        || (object.contains_key("type") && object.contains_key("data"))
        || (object.contains_key("lc") && object.contains_key("kwargs"))
        || object
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| role_of(t).is_some())
}

/// Keys a log may keep a conversation's messages under, in order of preference.
const MESSAGE_KEYS: [&str; 5] = ["messages", "traj", "trajectory", "conversation", "history"];

/// Keys a log may keep a run's sub-agent runs under (each a run of its own).
const CHILD_KEYS: [&str; 4] = ["subagents", "agents", "children", "sidechains"];

/// How deep nested sub-agent runs are read.
const MAX_TREE_DEPTH: usize = 8;

/// The run `value` holds, then every sub-agent run nested in it (depth first), each
/// judged as a run of its own: its id is its caller's, `>`, and its own id, agent name
/// or place; a child that does not say whether it succeeded takes its caller's word.
fn tree_of(value: Value, place: String, source: &str) -> Vec<Result<LoggedRun, InputError>> {
    let mut runs = Vec::new();
    collect_tree(value, place, source, None, 0, &mut runs);
    runs
}

fn collect_tree(
    mut value: Value,
    place: String,
    source: &str,
    inherited: Option<bool>,
    depth: usize,
    runs: &mut Vec<Result<LoggedRun, InputError>>,
) {
    let children: Vec<Value> = match value.as_object_mut() {
        Some(object) if depth < MAX_TREE_DEPTH => CHILD_KEYS
            .iter()
            .filter_map(|key| match object.get(*key) {
                Some(Value::Array(items)) if items.iter().all(is_run) && !items.is_empty() => {
                    object.remove(*key)
                }
                _ => None,
            })
            .flat_map(|v| match v {
                Value::Array(items) => items,
                _ => Vec::new(),
            })
            .collect(),
        _ => Vec::new(),
    };
    let run = run_of(value, place.clone(), source).map(|mut run| {
        run.success = run.success.or(inherited);
        if depth > 0 {
            run.id = place.clone();
        }
        run
    });
    let (parent_id, success) = match &run {
        Ok(run) => (run.id.clone(), run.success),
        Err(_) => (place.clone(), inherited),
    };
    runs.push(run);
    for (i, child) in children.into_iter().enumerate() {
        let name = child
            .get("id")
            .or_else(|| child.get("agent"))
            .or_else(|| child.get("name"))
            .and_then(Value::as_str)
            .map_or_else(|| format!("#{}", i + 1), str::to_owned);
        collect_tree(
            child,
            format!("{parent_id}>{name}"),
            source,
            success,
            depth + 1,
            runs,
        );
    }
}

/// True for a value that is a run (a conversation) rather than a name or a message.
fn is_run(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.first().is_some_and(is_message),
        Value::Object(object) => MESSAGE_KEYS.iter().any(|k| object.contains_key(*k)),
        _ => false,
    }
}

/// The run `value` holds (an array of messages, or an object with them).
fn run_of(value: Value, place: String, source: &str) -> Result<LoggedRun, InputError> {
    let fail = |message: String| InputError {
        place: place.clone(),
        message,
    };
    let (object, messages) = match value {
        Value::Array(messages) => (Map::new(), messages),
        Value::Object(mut object) => {
            let messages = match MESSAGE_KEYS.iter().find_map(|k| object.remove(*k)) {
                Some(Value::Array(messages)) => messages,
                Some(_) => return Err(fail("`messages` is not an array".to_owned())),
                None => request_and_response(&mut object).ok_or_else(|| {
                    fail(
                        "no `messages` array: give a conversation as an array of messages or an object with `messages`"
                            .to_owned(),
                    )
                })?,
            };
            (object, messages)
        }
        _ => {
            return Err(fail(
                "a conversation is an array of messages or an object with `messages`".to_owned(),
            ));
        }
    };
    let messages = to_messages(messages).map_err(fail)?;
    let tools = match object.get("tools") {
        Some(Value::Array(tools)) => tools.iter().filter_map(tool_spec).collect(),
        _ => Vec::new(),
    };
    Ok(LoggedRun {
        id: object
            .get("id")
            .and_then(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .unwrap_or_else(|| place.clone()),
        source: object
            .get("source")
            .and_then(Value::as_str)
            .map_or_else(|| source.to_owned(), str::to_owned),
        success: success_of(&object),
        model: object
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned),
        messages,
        tools,
    })
}

/// An OpenAI request log (`{"request": {"messages": …}, "response": {"choices": …}}`): the
/// request's messages and the reply the response carried.
fn request_and_response(object: &mut Map<String, Value>) -> Option<Vec<Value>> {
    let request = object.get("request")?.clone();
    let mut messages = request.get("messages")?.as_array()?.clone();
    if let Some(tools) = request.get("tools") {
        object.entry("tools").or_insert_with(|| tools.clone());
    }
    if let Some(model) = request.get("model") {
        object.entry("model").or_insert_with(|| model.clone());
    }
    if let Some(reply) = object
        .get("response")
        .and_then(|r| r.pointer("/choices/0/message"))
    {
        messages.push(reply.clone());
    }
    Some(messages)
}

/// Whether the run solved its task: `success` (or `solved`, `resolved`, `utility`) as a
/// boolean, 0/1 or a word; else a `reward` of 1.
fn success_of(object: &Map<String, Value>) -> Option<bool> {
    for key in ["success", "solved", "resolved", "utility"] {
        match object.get(key) {
            Some(Value::Bool(b)) => return Some(*b),
            Some(Value::Number(n)) => return n.as_f64().map(|x| x >= 1.0),
            Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" | "solved" | "resolved" | "success" | "pass" | "passed" => {
                    return Some(true);
                }
                "false" | "no" | "0" | "unsolved" | "failure" | "fail" | "failed" => {
                    return Some(false);
                }
                _ => {}
            },
            _ => {}
        }
    }
    object
        .get("reward")
        .and_then(Value::as_f64)
        .map(|r| r >= 1.0 - 1e-9)
}

/// A tool declaration: OpenAI's (`{"type": "function", "function": {…}}`), flat, or
/// Anthropic's (`input_schema`).
fn tool_spec(value: &Value) -> Option<ToolSpec> {
    let function = value.get("function").unwrap_or(value);
    Some(ToolSpec {
        name: function.get("name")?.as_str()?.to_owned(),
        description: function
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        parameters: function
            .get("parameters")
            .or_else(|| function.get("input_schema"))
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
    })
}

/// buddy's role for a log's role or LangChain type, if it knows it.
fn role_of(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "system" | "developer" | "systemmessage" => "system",
        "user" | "human" | "humanmessage" => "user",
        "assistant" | "ai" | "model" | "aimessage" | "aimessagechunk" => "assistant",
        "tool" | "function" | "ipython" | "toolmessage" | "functionmessage" => "tool",
        "note" => "note",
        _ => return None,
    })
}

/// The messages of a conversation, or what is wrong with the first bad one.
fn to_messages(values: Vec<Value>) -> Result<Vec<Message>, String> {
    let mut out = Vec::with_capacity(values.len());
    // Ids given to calls that came without one (legacy `function_call`): a `function`
    // message answers the latest of them.
    let mut unnamed = 0usize;
    let mut last_unnamed: Option<String> = None;
    for (i, value) in values.into_iter().enumerate() {
        let object =
            unwrap_message(value).ok_or_else(|| format!("messages[{i}] is not an object"))?;
        let role_name = object
            .get("role")
            .or_else(|| object.get("type"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let role = role_of(&role_name).ok_or_else(|| {
            format!(
                "messages[{i}]: unknown role `{role_name}`; use system, developer, user, assistant or tool"
            )
        })?;
        let content = object.get("content");
        match role {
            "system" => out.push(Message::system(text_of(content))),
            "note" => out.push(Message::note(text_of(content))),
            "user" => {
                // Anthropic-style results come inside a user message.
                let results = blocks(content, "tool_result");
                for block in &results {
                    out.push(Message::tool_result(
                        str_of(block, "tool_use_id"),
                        text_of(block.get("content")),
                        block
                            .get("is_error")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    ));
                }
                let text = text_of(content);
                if results.is_empty() || !text.trim().is_empty() {
                    out.push(if Message::is_note_text(&text) {
                        Message::note(text)
                    } else {
                        Message::user(text)
                    });
                }
            }
            "assistant" => {
                let mut calls = tool_calls_of(&object);
                for block in blocks(content, "tool_use") {
                    calls.push(ToolCall::new(
                        str_of(&block, "id"),
                        str_of(&block, "name"),
                        arguments_text(block.get("input")),
                    ));
                }
                if let Some(call) = object.get("function_call").filter(|v| v.is_object()) {
                    unnamed += 1;
                    let id = format!("function_call_{unnamed}");
                    last_unnamed = Some(id.clone());
                    calls.push(ToolCall::new(
                        id,
                        str_of(call, "name"),
                        arguments_text(call.get("arguments")),
                    ));
                }
                let text = text_of(content);
                out.push(Message::Assistant {
                    content: (!text.is_empty()).then_some(text),
                    tool_calls: calls,
                });
            }
            _ => {
                let id = object
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| {
                        (role_name == "function")
                            .then(|| last_unnamed.clone())
                            .flatten()
                    })
                    .unwrap_or_default();
                let is_error = object.get("is_error").and_then(Value::as_bool) == Some(true)
                    || object.get("status").and_then(Value::as_str) == Some("error")
                    || object
                        .get("error")
                        .is_some_and(|e| !e.is_null() && e != false);
                out.push(Message::tool_result(id, text_of(content), is_error));
            }
        }
    }
    Ok(out)
}

/// The message's fields, out of LangChain's wrappers (`{"type", "data"}`, or a
/// serialised constructor with `kwargs`).
fn unwrap_message(value: Value) -> Option<Map<String, Value>> {
    let Value::Object(mut object) = value else {
        return None;
    };
    if let Some(Value::Object(mut kwargs)) = object.remove("kwargs") {
        let class = object
            .get("id")
            .and_then(Value::as_array)
            .and_then(|path| path.last())
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        kwargs.entry("type").or_insert(Value::String(class));
        return Some(kwargs);
    }
    if let (Some(Value::String(kind)), Some(Value::Object(_))) =
        (object.get("type").cloned(), object.get("data"))
        && let Some(Value::Object(mut data)) = object.remove("data")
    {
        data.insert("type".to_owned(), Value::String(kind));
        data.remove("role");
        return Some(data);
    }
    Some(object)
}

/// The tool calls of an assistant message: OpenAI's (`function: {name, arguments}`),
/// flat (`name`, `arguments` / `args` / `input`), or LangChain's (`additional_kwargs`).
fn tool_calls_of(object: &Map<String, Value>) -> Vec<ToolCall> {
    let list = object
        .get("tool_calls")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
        .or_else(|| {
            object
                .get("additional_kwargs")
                .and_then(|k| k.get("tool_calls"))
                .and_then(Value::as_array)
        });
    list.map(|calls| {
        calls
            .iter()
            .map(|call| {
                let function = call.get("function").unwrap_or(call);
                let arguments = function
                    .get("arguments")
                    .or_else(|| function.get("args"))
                    .or_else(|| function.get("input"));
                ToolCall::new(
                    str_of(call, "id"),
                    str_of(function, "name"),
                    arguments_text(arguments),
                )
            })
            .collect()
    })
    .unwrap_or_default()
}

/// A call's arguments as the JSON text a model sends: a string as it is, anything else
/// written out (`{}` when missing).
fn arguments_text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// A string field, or empty.
fn str_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Content blocks of one `kind` in a list of parts.
fn blocks(content: Option<&Value>, kind: &str) -> Vec<Value> {
    match content {
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some(kind))
            .cloned()
            .collect(),
        _ => Vec::new(),
    }
}

/// The text of a content field: a string, or the text parts of a list joined by newlines.
fn text_of(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => match o.get("type").and_then(Value::as_str) {
                    Some("tool_use" | "tool_result" | "image" | "image_url") => None,
                    _ => o
                        .get("text")
                        .or_else(|| o.get("content"))
                        .map(|t| text_of(Some(t))),
                },
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
