//! Finalize: one last model call without tools, and buddy's own answer when even
//! that yields no text. Also the optional `finish` tool.

use buddy_core::{GuardAction, GuardKind, Message, StopReason, ToolSpec};
use serde_json::json;
use tracing::{debug, warn};

use crate::engine::TurnOutcome;
use crate::model_call::CallEnd;
use crate::policy::OnLimit;
use crate::turn::{FinalizeCause, Turn};

/// Name of the tool that ends a turn with an answer (policy `finish_tool`).
pub(crate) const FINISH_TOOL: &str = "finish";

/// Longest piece of one tool result quoted in buddy's composed answer.
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
            evidence,
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
        self.emit_guard_with(guard, GuardAction::Finalize, None, detail.clone(), evidence)
            .await;
        debug!(%reason, %detail, "finalize: one last model call without tools");
        let instruction = finalize_instruction(&detail);
        // Tools stay defined but not callable: some APIs (Anthropic) refuse a history with
        // tool blocks and no tool definitions; providers without `tool_choice` drop them.
        let toolbox = self.toolbox_handle();
        let all_tools = toolbox.specs();
        let defined = (!all_tools.is_empty()).then_some(all_tools);
        match self.model_call(defined, Some(&instruction)).await {
            Ok(reply) => {
                if !reply.tool_calls.is_empty() {
                    debug!(
                        ignored = reply.tool_calls.len(),
                        "finalize reply asked for tools; ignored"
                    );
                }
                if reply.chanted {
                    self.emit_guard(
                        GuardKind::RepetitiveOutput,
                        GuardAction::CutReply,
                        None,
                        "the final reply repeated one chunk of text over and over; it was cut after the first copy"
                            .to_owned(),
                    )
                    .await;
                }
                let text = self.checked_final_reply(reply.text, &instruction).await;
                self.finish_with_answer(reason, text).await
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
            Err(CallEnd::ContextRefused(e)) => {
                warn!(error = %e, "finalize call refused as too long; answering from the tool results");
                self.finish_with_answer(reason, String::new()).await
            }
            Err(CallEnd::Provider(e)) => {
                warn!(error = %e, "finalize call failed; answering from the tool results");
                self.finish_with_answer(reason, String::new()).await
            }
            Err(CallEnd::Deadline) => self.finish_with_answer(reason, String::new()).await,
        }
    }
}

impl Turn<'_> {
    /// A reply the model gave on its own as its answer, or an empty text (so the turn
    /// ends `no_answer`, quoting the tool results) when it is a tool call written as text
    /// or an echo of buddy's notes.
    pub(crate) async fn screened_answer(&mut self, text: String) -> String {
        if text.trim().is_empty() {
            return text;
        }
        match self.rejected(&text, "") {
            Some(why) => {
                self.answer_composed(format!(
                    "the reply was not used as the answer: {why}; buddy wrote the answer from the tool results"
                ))
                .await;
                String::new()
            }
            None => text,
        }
    }

    /// Why `text` cannot be the answer, if it cannot (see [`rejected_final_reply`]).
    fn rejected(&self, text: &str, instruction: &str) -> Option<&'static str> {
        let names: Vec<&str> = self
            .toolbox()
            .specs()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        rejected_final_reply(text, instruction, &names)
    }

    /// Says that buddy wrote (part of) the answer, and why.
    async fn answer_composed(&self, detail: String) {
        self.emit_guard(
            GuardKind::FinalAnswerCheck,
            GuardAction::ComposedAnswer,
            None,
            detail,
        )
        .await;
    }

    /// The Finalize reply, or an empty text (so buddy composes the answer) when it is
    /// empty, echoes buddy's instruction or writes a tool call as text. An accepted
    /// reply that uses none of the turn's tool results gets them quoted after it.
    async fn checked_final_reply(&mut self, text: String, instruction: &str) -> String {
        if let Some(why) = self.rejected(&text, instruction) {
            self.answer_composed(format!(
                "the final reply was not used: {why}; buddy wrote the answer from the tool results"
            ))
            .await;
            return String::new();
        }
        let results = successful_results(&self.history[self.rounds_from..]);
        if results.is_empty() || results.iter().any(|(_, r)| mentions(&text, r)) {
            return text;
        }
        self.answer_composed(
            "the final reply used none of the tool results; buddy quoted them after it".to_owned(),
        )
        .await;
        let quoted = quote_results(&results);
        let addition = format!("\n\nWhat the tools returned:\n{quoted}");
        self.events
            .emit(buddy_core::ChatEvent::TextDelta {
                text: addition.clone(),
            })
            .await;
        format!("{}{addition}", text.trim_end())
    }
}

/// Why a Finalize reply cannot be the answer, if it cannot.
pub(crate) fn rejected_final_reply(
    text: &str,
    instruction: &str,
    tools: &[&str],
) -> Option<&'static str> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Some("it was empty");
    }
    let lower = trimmed.to_lowercase();
    let normalized = crate::guards::similarity::normalize(trimmed);
    let instruction = crate::guards::similarity::normalize(instruction);
    if lower.contains("[buddy]")
        || lower.contains("tool use has ended")
        || lower.contains("do not call any tools")
        || crate::guards::similarity::text_similarity(&normalized, &instruction) >= 0.4
    {
        return Some("it repeated buddy's own instruction");
    }
    if looks_like_a_tool_call(trimmed, tools) {
        return Some("it was a tool call written as text");
    }
    None
}

/// True for text that is a tool call in disguise: JSON naming a function and its
/// arguments, a chat template's tool-call markup, or `tool_name(...)` / `function.tool_name:`.
pub(crate) fn looks_like_a_tool_call(text: &str, tools: &[&str]) -> bool {
    let lower = text.to_lowercase();
    const MARKUP: [&str; 5] = [
        "<tool_call",
        "<function",
        "[tool_calls]",
        "<|python_tag|>",
        "\"tool_calls\"",
    ];
    if MARKUP.iter().any(|m| lower.contains(m)) {
        return true;
    }
    if lower.contains("\"name\"")
        && (lower.contains("\"arguments\"") || lower.contains("\"parameters\""))
    {
        return true;
    }
    // `function.name: {…}` / `functions.name(…)`, whatever the name (small models invent them).
    for marker in ["function.", "functions."] {
        for (at, _) in lower.match_indices(marker) {
            let rest = &lower[at + marker.len()..];
            let name_len = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(rest.len());
            if name_len > 0 && rest[name_len..].trim_start().starts_with([':', '(', '{']) {
                return true;
            }
        }
    }
    let start = lower
        .trim_start_matches(['`', ' ', '\n'])
        .trim_start_matches("json")
        .trim_start();
    tools.iter().any(|tool| {
        let tool = tool.to_lowercase();
        lower.contains(&format!("function.{tool}"))
            || lower.contains(&format!("functions.{tool}"))
            || start
                .strip_prefix(tool.as_str())
                .is_some_and(|rest| rest.trim_start().starts_with(['(', ':', '{']))
    })
}

/// True when some tool of this turn returned a result that is not an error.
pub(crate) fn has_successful_results(turn_messages: &[Message]) -> bool {
    !successful_results(turn_messages).is_empty()
}

/// The successful tool results of this turn as (tool name, result), oldest first.
fn successful_results(turn_messages: &[Message]) -> Vec<(&str, &str)> {
    let mut names = std::collections::HashMap::new();
    for message in turn_messages {
        if let Message::Assistant { tool_calls, .. } = message {
            for call in tool_calls {
                names.insert(call.id.as_str(), call.name.as_str());
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    turn_messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                is_error: false,
            } if !content.trim().is_empty() => {
                let name = names.get(tool_call_id.as_str()).copied().unwrap_or("tool");
                seen.insert((name, content.as_str()))
                    .then_some((name, content.as_str()))
            }
            _ => None,
        })
        .collect()
}

/// Words too common to show that an answer used a result.
const COMMON_WORDS: [&str; 20] = [
    "about", "been", "could", "from", "have", "into", "more", "only", "should", "than", "that",
    "them", "then", "there", "they", "this", "were", "what", "which", "with",
];

/// True when `answer` shows it used `result`: it shares two of the result's distinctive
/// words and numbers, or a third of them, or one number of two digits or more.
fn mentions(answer: &str, result: &str) -> bool {
    let answer = answer.to_lowercase();
    let head: String = result
        .chars()
        .take(FALLBACK_RESULT_CHARS)
        .collect::<String>()
        .to_lowercase();
    let mut tokens: Vec<&str> = head
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| {
            let digits = t.chars().any(|c| c.is_ascii_digit());
            (digits && !t.is_empty()) || (t.chars().count() >= 4 && !COMMON_WORDS.contains(t))
        })
        .collect();
    tokens.sort_unstable();
    tokens.dedup();
    tokens.truncate(12);
    if tokens.is_empty() {
        return answer.contains(head.trim());
    }
    let found: Vec<&&str> = tokens.iter().filter(|t| answer.contains(**t)).collect();
    found.len() >= 2
        || found.len() * 3 >= tokens.len()
        || found
            .iter()
            .any(|t| t.chars().filter(char::is_ascii_digit).count() >= 2)
}

/// The latest results quoted one per line, each cut to a readable length.
fn quote_results(results: &[(&str, &str)]) -> String {
    let skip = results.len().saturating_sub(FALLBACK_RESULTS);
    results[skip..]
        .iter()
        .map(|(name, content)| {
            let flat: String = content.split_whitespace().collect::<Vec<_>>().join(" ");
            let mut quoted: String = flat.chars().take(FALLBACK_RESULT_CHARS).collect();
            if quoted.len() < flat.len() {
                quoted.push('…');
            }
            format!("- {name}: {quoted}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// buddy's own answer from this turn's tool results, for when the model gave none.
pub(crate) fn fallback_answer(turn_messages: &[Message], reason: StopReason) -> String {
    let why = match reason {
        StopReason::Completed | StopReason::FinishTool | StopReason::NoAnswer => {
            "the model gave no answer text".to_owned()
        }
        other => format!("the turn stopped: {other}"),
    };
    let results = successful_results(turn_messages);
    if results.is_empty() {
        return format!("I could not produce an answer ({why}), and no tool returned a result.");
    }
    format!(
        "I could not produce a final answer ({why}). What the tools returned:\n{}",
        quote_results(&results)
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
        assert!(text.contains("What the tools returned"), "{text}");
        assert!(text.contains("- get_time: 12:00 UTC"), "{text}");
        assert!(!text.contains("boom"), "{text}");
    }

    #[test]
    fn final_replies_that_are_no_answer_are_rejected() {
        let instruction = finalize_instruction("a loop was detected");
        let tools = ["get_time", "list_dir"];
        let rejected = |t: &str| rejected_final_reply(t, &instruction, &tools);
        assert_eq!(rejected("  \n"), Some("it was empty"));
        assert_eq!(
            rejected(&instruction),
            Some("it repeated buddy's own instruction")
        );
        assert_eq!(
            rejected("Tool use has ended for this turn. I will give my final answer."),
            Some("it repeated buddy's own instruction")
        );
        for call in [
            "function.get_time: { }",
            "function.use_default: { }",
            "functions.lookup(city=\"Paris\")",
            "get_time()",
            "```json\n{\"name\": \"get_time\", \"arguments\": {}}\n```",
            "<tool_call>{\"name\":\"list_dir\"}</tool_call>",
        ] {
            assert_eq!(
                rejected(call),
                Some("it was a tool call written as text"),
                "{call}"
            );
        }
        assert_eq!(rejected("It is 12:00 UTC; get_time said so."), None);
        assert_eq!(rejected("The function.py module defines it."), None);
    }

    #[test]
    fn an_answer_mentions_a_result_when_it_shares_its_words_or_numbers() {
        assert!(mentions(
            "It is 12:00 UTC on 22 November 2026.",
            "2026-11-22T12:00:00Z"
        ));
        assert!(!mentions(
            "The current time is 10:30 AM.",
            "2026-11-22T19:45:12Z"
        ));
        assert!(mentions(
            "The folder holds notes.md and todo.txt.",
            "notes.md\ntodo.txt\nsrc/"
        ));
        assert!(mentions(
            "Take an umbrella today (light rain); tomorrow should be dry.",
            "Paris: 14°C, light rain, wind 20 km/h from the west."
        ));
        assert!(!mentions(
            "That should be about it, from what I can see.",
            "Paris: 14°C, light rain, wind 20 km/h from the west."
        ));
    }

    #[test]
    fn finish_answer_needs_a_non_empty_string() {
        assert_eq!(finish_answer(r#"{"answer":" 42 "}"#), Some("42".into()));
        assert_eq!(finish_answer(r#"{"answer":""}"#), None);
        assert_eq!(finish_answer(r#"{"answer":7}"#), None);
        assert_eq!(finish_answer("nope"), None);
    }
}
