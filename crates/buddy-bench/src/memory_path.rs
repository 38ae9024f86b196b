//! The ways a turn carrying a large tool-call argument can go, for `buddy bench memory`:
//! each one a scenario for the mock model server, the `buddy.toml` lines that make it go
//! that way, and the stop reason it must end with.

use serde_json::{Value, json};

/// How the turn with the large argument ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum MemoryPath {
    /// The tool counts the bytes and the model answers (the window is raised to fit).
    #[default]
    Completed,
    /// The model's window is left as it is: the next request does not fit.
    Overflow,
    /// The window is raised, but the model server refuses the next request as too long
    /// for its context (twice: buddy trims and retries once).
    ContextRefused,
    /// The tool exits non-zero; the model answers from the error.
    ToolError,
    /// The argument does not match the tool's schema; the model answers from the refusal.
    InvalidArguments,
    /// The model server refuses the next request (HTTP 400).
    ProviderError,
}

impl MemoryPath {
    /// Every path, in the order the report lists them.
    pub const ALL: [MemoryPath; 6] = [
        MemoryPath::Completed,
        MemoryPath::Overflow,
        MemoryPath::ContextRefused,
        MemoryPath::ToolError,
        MemoryPath::InvalidArguments,
        MemoryPath::ProviderError,
    ];

    /// The stop reason a turn on this path ends with (its wire name).
    pub fn expected_reason(self) -> &'static str {
        match self {
            MemoryPath::Completed | MemoryPath::ToolError | MemoryPath::InvalidArguments => {
                "completed"
            }
            MemoryPath::Overflow | MemoryPath::ContextRefused => "context_overflow",
            MemoryPath::ProviderError => "provider_error",
        }
    }

    /// Model calls a turn on this path makes (the overflowing request is never sent).
    fn model_calls(self) -> u32 {
        match self {
            MemoryPath::Overflow => 1,
            _ => 2,
        }
    }

    /// Its name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            MemoryPath::Completed => "completed",
            MemoryPath::Overflow => "overflow",
            MemoryPath::ContextRefused => "context-refused",
            MemoryPath::ToolError => "tool-error",
            MemoryPath::InvalidArguments => "invalid-arguments",
            MemoryPath::ProviderError => "provider-error",
        }
    }

    /// The scenario the mock serves: one call of `count_bytes` with `size` bytes of text,
    /// then what this path's second model call answers.
    pub fn scenario(self, size: usize) -> Value {
        let second = match self {
            MemoryPath::ProviderError => json!({"error": {"status": 400,
                "message": "This model's request was refused by the bench."}}),
            MemoryPath::ContextRefused => json!({"error": {"status": 400,
                "message": "This model's maximum context length is 128000 tokens. However, your messages \
                            resulted in 3932190 tokens. Please reduce the length of the messages."}}),
            _ => json!({"text": "Counted: {last_result}"}),
        };
        json!({
            "name": "big_arguments",
            "description": "A reply whose tool call carries a large argument.",
            "prompt": "Count the bytes of this text.",
            "tools": [{"name": "count_bytes", "description": "Counts bytes.",
                       "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                       "template": "counted"}],
            "expect": {"stop_reason": self.expected_reason(), "model_calls": self.model_calls(), "tool_calls": 1},
            "rules": [
                {"when": {"round": 1}, "reply": {"tool_calls": [{"name": "count_bytes", "arguments": {"text": "a".repeat(size)}}]}},
                {"when": {}, "reply": second}
            ]
        })
    }

    /// The `[policy]` and `[skills]` lines of this path's `buddy.toml`.
    pub(crate) fn config(self) -> String {
        let window = match self {
            MemoryPath::Overflow => "",
            _ => {
                "# Room for the arguments in the next request: the whole turn runs.\ncontext_window = 16000000\n"
            }
        };
        let command = match self {
            MemoryPath::ToolError => {
                r#"["sh", "-c", "wc -c >/dev/null; echo 'cannot count today' >&2; exit 3"]"#
            }
            _ => r#"["wc", "-c"]"#,
        };
        let text_type = match self {
            MemoryPath::InvalidArguments => "integer",
            _ => "string",
        };
        format!(
            r#"[policy]
{window}[skills]
sandbox = "sandbox"
builtin = []
[[skills.command]]
name = "count_bytes"
description = "Counts the bytes of a text."
command = {command}
semantics = "pure"
[skills.command.parameters]
type = "object"
required = ["text"]
properties.text = {{ type = "{text_type}" }}
"#
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_has_its_own_scenario_or_config() {
        let seen: std::collections::HashSet<String> = MemoryPath::ALL
            .iter()
            .map(|p| format!("{}{}", p.scenario(4), p.config()))
            .collect();
        assert_eq!(seen.len(), MemoryPath::ALL.len());
    }
}
