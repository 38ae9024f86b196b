//! The scenario file format: a prompt, the tools, the policy it runs under, the
//! outcome it expects, and the rules the scripted model follows.

use std::path::Path;

use buddy_core::{RepeatSemantics, StopReason};
use buddy_engine::PolicyPatch;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::{ClockKind, SimClock};
use crate::rules::Rule;

/// A scenario could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario `{path}`: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("scenario `{path}` is not valid: {message}")]
    Invalid { path: String, message: String },
}

/// One scripted scenario (a `scenarios/*.json` file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The user's message that starts the turn.
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The tools the turn offers: built-in skills by name, or scripted stubs.
    #[serde(default)]
    pub tools: Vec<ScenarioTool>,
    /// Policy fields to change from the defaults, each checked as the file is read (an
    /// unknown field or a wrong value is an error naming the field and the file).
    #[serde(default)]
    pub policy: PolicyPatch,
    /// The outcome the scenario must reach.
    pub expect: Expectation,
    /// Sub-agents offered to the turn as tools (`[[agents]]` of buddy.toml); their
    /// calls are answered by the same rules (tell them apart by `system_contains`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<buddy_engine::AgentSpec>,
    /// `simulated`: buddy's waits (its checks of a pollable tool) pass at once on the
    /// scenario's own clock, which stub `timeline`s read; default `real`.
    #[serde(default, skip_serializing_if = "is_real")]
    pub clock: ClockKind,
    /// The simulated clock (shared by the stubs and turns made from this scenario).
    #[serde(skip)]
    pub sim: SimClock,
    /// The client cancels the turn this long after it starts (a scripted Ctrl-C).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_after_ms: Option<u64>,
    /// The model's behaviour: the first rule whose `when` matches answers.
    pub rules: Vec<Rule>,
    /// Characters per streamed text chunk.
    #[serde(default = "default_chunk_chars")]
    pub chunk_chars: usize,
    /// When set, `buddy mock-server` streams text and tool arguments in pieces of this
    /// many characters, each event written on its own, as a hosted model sends tokens
    /// (unset: 16-character text pieces, arguments whole, the events written together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_chunk_chars: Option<usize>,
}

fn default_chunk_chars() -> usize {
    12
}

/// What a scenario expects of its turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    pub stop_reason: StopReason,
    pub model_calls: u32,
    pub tool_calls: u32,
    /// The fewest model calls a perfect agent would need; the rest are "wasted".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ideal_model_calls: Option<u32>,
    /// Text the final answer must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_contains: Option<String>,
}

/// A tool a scenario offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ScenarioTool {
    /// A built-in skill (`{"builtin": "get_time"}`), sandboxed by the runner.
    Builtin { builtin: String },
    /// A scripted stand-in with canned results.
    Stub(StubTool),
}

/// A scripted tool: fixed results in call order, or a template over the arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StubTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "any_object")]
    pub parameters: Value,
    #[serde(default)]
    pub semantics: RepeatSemantics,
    /// Results in call order; the last one repeats.
    #[serde(default)]
    pub results: Vec<StubResult>,
    /// Used when `results` is empty: `{key}` is replaced by the argument `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Time each call takes, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// Results by time since the stub's first call (on the scenario's clock): the first
    /// entry whose `until_ms` has not passed answers; one without `until_ms` answers
    /// from then on. Used instead of `results` when given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimedResult>,
    /// Lines every result starts with (a long log whose verdict is its last line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines_before: Option<RepeatedLine>,
}

/// A stub result that holds until `until_ms` after the stub's first call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimedResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<u64>,
    pub result: StubResult,
}

fn is_real(kind: &ClockKind) -> bool {
    *kind == ClockKind::Real
}

/// One line written `times` times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepeatedLine {
    /// The line, without its newline; `{i}` is its number from 1.
    pub line: String,
    pub times: usize,
}

fn any_object() -> Value {
    serde_json::json!({"type": "object"})
}

/// One canned tool result: text, or `{"error": "..."}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StubResult {
    Ok(String),
    Error { error: String },
}

impl Scenario {
    /// Loads and checks a scenario file.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text, &shown)
    }

    /// Parses and checks scenario JSON; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ScenarioError> {
        let scenario: Scenario =
            serde_json::from_str(text).map_err(|e| ScenarioError::Invalid {
                path: origin.to_owned(),
                message: e.to_string(),
            })?;
        if scenario.rules.is_empty() {
            return Err(ScenarioError::Invalid {
                path: origin.to_owned(),
                message: "it has no rules; add at least one rule with a reply".to_owned(),
            });
        }
        Ok(scenario)
    }

    /// Names of the built-in skills the scenario uses.
    pub fn builtin_tools(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter_map(|tool| match tool {
                ScenarioTool::Builtin { builtin } => Some(builtin.as_str()),
                ScenarioTool::Stub(_) => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn with_policy(policy: &str) -> String {
        format!(
            r#"{{"name":"x","prompt":"p","policy":{policy},"expect":{{"stop_reason":"completed","model_calls":1,"tool_calls":0}},"rules":[{{"reply":{{"text":"hi"}}}}]}}"#
        )
    }

    #[test]
    fn the_policy_is_typed_when_the_file_is_read() {
        let scenario = Scenario::parse(&with_policy(r#"{"max_model_calls":3}"#), "f.json").unwrap();
        let fields: Vec<&str> = scenario.policy.fields().map(|(k, _)| k).collect();
        assert_eq!(fields, ["max_model_calls"]);
        let mut policy = buddy_engine::LoopPolicy::default();
        policy.apply(&scenario.policy).unwrap();
        assert_eq!(policy.max_model_calls, 3);
    }

    #[test]
    fn a_wrong_policy_value_names_the_field_and_the_scenario() {
        for (policy, field) in [
            (r#"{"max_model_calls":"many"}"#, "max_model_calls"),
            (r#"{"max_modle_calls":3}"#, "max_modle_calls"),
        ] {
            let error = Scenario::parse(&with_policy(policy), "scenarios/f.json")
                .unwrap_err()
                .to_string();
            assert!(error.contains("scenarios/f.json"), "{error}");
            assert!(error.contains(field), "{error}");
        }
    }
}
