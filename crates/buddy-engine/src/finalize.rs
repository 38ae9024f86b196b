//! Finalize: one last model call without tools, and buddy's own answer when even
//! that yields no text. Also the optional `finish` tool.

use buddy_core::{GuardAction, Message, StopReason, ToolSpec};
use serde_json::json;
use tracing::{debug, warn};

use crate::engine::TurnOutcome;
use crate::model_call::CallEnd;
use crate::policy::OnLimit;
use crate::turn::{FinalizeCause, Turn};

/// Name of the tool that ends a turn with an answer (policy `finish_tool`).
pub(crate) const FINISH_TOOL: &str = "finish";

/// Longest piece of one tool result quoted in buddy's fallback answer.
const FALLBACK_RESULT_CHARS: usize = 300;
/// Most tool results quoted in buddy's fallback answer.
const FALLBACK_RESULTS: usize = 5;

/// The spec of the `finish` tool.
pub(crate) fn finish_tool_spec() -> ToolSpec {
    ToolSpec {
        name: FINISH_TOOL.to_owned(),
        description: "Call this once you have the final answer for the user; it ends the turn."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {"answer": {"type": "string", "description": "The final answer for the user."}},
            "required": ["answer"],
        }),
    }
}

/// The answer in a `finish` call's arguments, if they are valid.
pub(crate) fn finish_answer(arguments: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(arguments).ok()?;
    let answer = value.get("answer")?.as_str()?.trim();
    (!answer.is_empty()).then(|| answer.to_owned())
}

fn finalize_instruction(detail: &str) -> String {
    format!(
        "[buddy] Tool use has ended for this turn ({detail}). Do not call any tools. Using only the \
         conversation and tool results above, give the user your final answer now. If something \
         could not be done, say so briefly."
    )
}

impl Turn<'_> {
    /// Ends the turn through Finalize (or with an error when `on_limit = "error"`).
    pub(crate) async fn finalize(&mut self, cause: FinalizeCause) -> TurnOutcome {
        let FinalizeCause {
            reason,
            guard,
            detail,
        } = cause;
        if self.policy.on_limit == OnLimit::Error {
            self.emit_guard(guard, GuardAction::Error, None, detail.clone())
                .await;
            return self
                .finish_error(
                    reason,
                    format!("turn stopped ({reason}): {detail}; policy on_limit = \"error\" ends it without an answer"),
                )
                .await;
        }
        self.emit_guard(guard, GuardAction::Finalize, None, detail.clone())
            .await;
        debug!(%reason, %detail, "finalize: one last model call without tools");
        let instruction = finalize_instruction(&detail);
        // Tools stay defined but not callable: some APIs (Anthropic) refuse a history with
        // tool blocks and no tool definitions; providers without `tool_choice` drop them.
        let all_tools = self.toolbox.specs();
        let defined = (!all_tools.is_empty()).then_some(all_tools);
        match self.model_call(defined, Some(&instruction)).await {
            Ok(reply) => {
                if !reply.tool_calls.is_empty() {
                    debug!(
                        ignored = reply.tool_calls.len(),
                        "finalize reply asked for tools; ignored"
                    );
                }
                self.finish_with_answer(reason, reply.text).await
            }
            Err(CallEnd::Cancelled) => self.finish_cancelled().await,
            Err(CallEnd::Overflow(message)) => {
                self.finish_error(StopReason::ContextOverflow, message)
                    .await
            }
            Err(CallEnd::Invalid(e)) => {
                self.finish_error(StopReason::InvalidRequest, e.to_string())
                    .await
            }
            Err(CallEnd::Provider(e)) => {
                warn!(error = %e, "finalize call failed; answering from the tool results");
                self.finish_with_answer(reason, String::new()).await
            }
            Err(CallEnd::Deadline) => self.finish_with_answer(reason, String::new()).await,
        }
    }
}

/// buddy's own short answer from this turn's tool results, for when the model gave none.
pub(crate) fn fallback_answer(turn_messages: &[Message], reason: StopReason) -> String {
    let mut names = std::collections::HashMap::new();
    for message in turn_messages {
        if let Message::Assistant { tool_calls, .. } = message {
            for call in tool_calls {
                names.insert(call.id.as_str(), call.name.as_str());
            }
        }
    }
    let results: Vec<String> = turn_messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                is_error: false,
            } => {
                let name = names.get(tool_call_id.as_str()).copied().unwrap_or("tool");
                let first = content.lines().next().unwrap_or_default();
                let mut quoted: String = first.chars().take(FALLBACK_RESULT_CHARS).collect();
                if quoted.len() < content.len() {
                    quoted.push('…');
                }
                Some(format!("- {name}: {quoted}"))
            }
            _ => None,
        })
        .collect();
    let why = match reason {
        StopReason::Completed | StopReason::FinishTool => {
            "the model gave no answer text".to_owned()
        }
        other => format!("the turn stopped: {other}"),
    };
    if results.is_empty() {
        return format!("I could not produce an answer ({why}), and no tool returned a result.");
    }
    let skip = results.len().saturating_sub(FALLBACK_RESULTS);
    format!(
        "I could not produce a final answer ({why}). The latest tool results were:\n{}",
        results[skip..].join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use buddy_core::ToolCall;

    #[test]
    fn fallback_quotes_the_latest_successful_results() {
        let msgs = vec![
            Message::user("time?"),
            Message::Assistant {
                content: None,
                tool_calls: vec![
                    ToolCall::new("a", "get_time", "{}"),
                    ToolCall::new("b", "flaky", "{}"),
                ],
            },
            Message::tool_result("a", "12:00 UTC", false),
            Message::tool_result("b", "boom", true),
        ];
        let text = fallback_answer(&msgs, StopReason::LoopDetected);
        assert!(text.contains("loop_detected"), "{text}");
        assert!(text.contains("- get_time: 12:00 UTC"), "{text}");
        assert!(!text.contains("boom"), "{text}");
    }

    #[test]
    fn finish_answer_needs_a_non_empty_string() {
        assert_eq!(finish_answer(r#"{"answer":" 42 "}"#), Some("42".into()));
        assert_eq!(finish_answer(r#"{"answer":""}"#), None);
        assert_eq!(finish_answer(r#"{"answer":7}"#), None);
        assert_eq!(finish_answer("nope"), None);
    }
}
