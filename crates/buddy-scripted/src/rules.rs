//! The scripted model's rules: conditions on the request, and the reply to give.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One rule: when the request matches `when`, answer with `reply`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub when: Condition,
    pub reply: ReplyTemplate,
}

/// Conditions on the request; all that are given must hold. An empty condition always matches.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// Are any tools offered?
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_offered: Option<bool>,
    /// Is this tool offered?
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_offered: Option<String>,
    /// Does the request's system prompt contain this text (case-insensitive)? Tells a
    /// sub-agent's calls (its instructions are its system prompt) from its caller's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_contains: Option<String>,
    /// Is there a user message at all?
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_user_message: Option<bool>,
    /// Does the latest user message contain this text (case-insensitive)?
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_contains: Option<String>,
    /// Exactly this many tool results in the request (the whole conversation; use
    /// `round` for progress within the current turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_results: Option<usize>,
    /// At least this many tool results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_tool_results: Option<usize>,
    /// Fewer than this many tool results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_results_below: Option<usize>,
    /// The round: 1 + assistant messages after the latest user message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<usize>,
    /// `[m, r]`: the round modulo `m` is `r` (alternating behaviour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_mod: Option<[usize; 2]>,
    /// Does the latest tool result contain this text?
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_result_contains: Option<String>,
    /// Is the latest tool result an error?
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_result_is_error: Option<bool>,
    /// Is the request's last message a note from buddy (a note, or user text starting
    /// `[system note]`) containing this text (case-insensitive)?
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_note_contains: Option<String>,
}

/// The reply a rule gives. Text and string arguments may use placeholders:
/// `{n}` the round, `{results}` tool results so far, `{last_result}` the latest tool
/// result's first line, `{user}` the latest user message. A string argument that is
/// exactly `"{n}"` or `"{results}"` becomes a number.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<CallTemplate>,
    /// The finish reason to report (wire value such as `stop`, `tool_calls`, `length`);
    /// default: `tool_calls` when there are calls, else `stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<String>,
    /// Instead of a reply, the model server refuses the request with this HTTP error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorTemplate>,
}

/// An HTTP error a model server answers with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorTemplate {
    pub status: u16,
    pub message: String,
}

/// One tool call in a reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallTemplate {
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// Send exactly this argument text instead (e.g. malformed JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_arguments: Option<String>,
    /// The call's id (default `call_<reply>_<index>`): a server that sends an id again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}
