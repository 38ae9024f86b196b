//! Reading recorded conversations for `buddy judge`, as the tools people use log them:
//! OpenAI Chat Completions messages (a JSON array, an object with `messages`, or JSONL
//! with one conversation per line, as the OpenAI SDKs and fine-tuning files have them),
//! LangChain's message dicts (`{"type": "ai", "data": {…}}`, or its serialised
//! constructors), buddy's own stored messages, and Anthropic-style content blocks
//! (`tool_use` / `tool_result`). Lenient where logs differ (arguments as an object, a
//! missing call id, content as a list of parts); a conversation that cannot be read is
//! reported with its place and skipped, never guessed.

mod content;
mod messages;
mod run;
#[cfg(test)]
mod tests;

use buddy_core::{Message, ToolSpec};
use serde_json::Value;

use messages::role_of;
use run::run_of;

/// One recorded run to judge.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedRun {
    /// The run's `id`, else its place (`file:line` or `file#n`).
    pub id: String,
    /// The run's `source`, else the file's name.
    pub source: String,
    /// Whether the run solved its task, when the log says.
    pub success: Option<bool>,
    /// The model the log names, if any.
    pub model: Option<String>,
    /// The conversation, as buddy's messages.
    pub messages: Vec<Message>,
    /// The tools the log declares.
    pub tools: Vec<ToolSpec>,
}

/// A conversation that could not be read, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{place}: {message}")]
pub struct InputError {
    /// The file, `file:line` or `file#n`.
    pub place: String,
    /// What is wrong, in words a user can act on.
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
pub(super) const MESSAGE_KEYS: [&str; 5] =
    ["messages", "traj", "trajectory", "conversation", "history"];

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
