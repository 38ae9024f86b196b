//! Checks on the text that ends a turn: an answer that is empty, echoes buddy's own
//! words, or writes a tool call as text is not taken; an answer that ignores every tool
//! result gets them quoted after it; and buddy's own answer when the model gave none.

use buddy_core::{GuardAction, GuardKind, Message, StopReason};

use super::verdict::Trip;
use crate::guards::similarity::{normalize, text_similarity};
use crate::words::{self, Unanswered};

/// Longest piece of one tool result quoted in buddy's composed answer.
const FALLBACK_RESULT_CHARS: usize = 300;
/// Most tool results quoted in buddy's fallback answer.
const FALLBACK_RESULTS: usize = 5;

/// A reply without calls, screened as the turn's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Screened {
    /// It is the answer.
    Answer(String),
    /// It holds no answer (empty, cut off, buddy's words, a tool call written as text);
    /// the trip (if any) says why it was not taken.
    Unanswered(Unanswered, Option<Trip>),
}

/// The model's own answer (a reply without calls) screened: empty (or cut off before
/// any text), a tool call written as text, or buddy's own words is no answer. `said` is
/// what buddy told the model in this turn (its notes, its "not run" results).
pub(crate) fn screen(text: String, cut_off: bool, tools: &[&str], said: &Said<'_>) -> Screened {
    if text.trim().is_empty() {
        let why = if cut_off {
            Unanswered::CutOff
        } else {
            Unanswered::Empty
        };
        return Screened::Unanswered(why, None);
    }
    match rejected(&text, "", tools, said) {
        Some(why) => {
            let trip = composed(format!(
                "the reply was not used as the answer: {why}; buddy wrote the answer from the tool results"
            ));
            let kind = if why == CALL_AS_TEXT {
                Unanswered::CallAsText
            } else {
                Unanswered::BuddysWords
            };
            Screened::Unanswered(kind, Some(trip))
        }
        None => Screened::Answer(text),
    }
}

/// Asks the model again when its reply held no answer, at most `max_reasks` times a
/// turn: the note to send and the trip that says so, or `None` when the budget is spent.
pub(crate) fn reask(
    policy: &crate::policy::LoopPolicy,
    memory: &mut super::memory::JudgeMemory,
    why: Unanswered,
) -> Option<(&'static str, Trip)> {
    if memory.reasks >= policy.max_reasks {
        return None;
    }
    memory.reasks += 1;
    let what = match why {
        Unanswered::Empty => "the reply was empty",
        Unanswered::CutOff => "the reply was cut off before any answer",
        Unanswered::BuddysWords => "the reply repeated buddy's own notes",
        Unanswered::CallAsText => "the reply was a tool call written as text",
    };
    Some((
        words::reask_note(why),
        Trip::new(
            GuardKind::FinalAnswerCheck,
            GuardAction::AskedAgain,
            format!(
                "{what}; the model is asked again ({} of {} in this turn)",
                memory.reasks, policy.max_reasks
            ),
        ),
    ))
}

/// Asks the model to go on where a reply cut by the output limit stopped, at most
/// `max_continuations` times a turn: the note and the trip, or `None` when spent.
pub(crate) fn continuation(
    policy: &crate::policy::LoopPolicy,
    memory: &mut super::memory::JudgeMemory,
) -> Option<(&'static str, Trip)> {
    if memory.continuations >= policy.max_continuations {
        return None;
    }
    memory.continuations += 1;
    Some((
        words::CONTINUE_CUT_NOTE,
        Trip::new(
            GuardKind::FinalAnswerCheck,
            GuardAction::AskedAgain,
            format!(
                "the reply hit the output token limit; the model is asked to continue it ({} of {} in this turn)",
                memory.continuations, policy.max_continuations
            ),
        ),
    ))
}

/// What buddy said in a turn, for recognising it told back in an answer: its notes, and
/// the facts of the turn (tool results and call arguments), which a note may quote and an
/// answer may fairly repeat.
#[derive(Clone, Debug, Default)]
pub(crate) struct Said<'a> {
    pub notes: Vec<&'a str>,
    pub facts: Vec<&'a str>,
}

/// What buddy said in `turn_messages`. (The results of calls buddy did not run are
/// results: an answer may report them.)
pub(crate) fn buddys_words(turn_messages: &[Message]) -> Said<'_> {
    let mut said = Said::default();
    for message in turn_messages {
        match message {
            Message::Note { content } => said.notes.push(content),
            Message::Tool { content, .. } => said.facts.push(content),
            Message::Assistant { tool_calls, .. } => {
                said.facts
                    .extend(tool_calls.iter().map(|c| c.arguments.as_str()));
            }
            _ => {}
        }
    }
    said
}

/// What becomes of the Finalize reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FinalCheck {
    /// It is the answer as it stands.
    Use(String),
    /// It is not used: buddy composes the answer from the tool results.
    Compose(Trip),
    /// It is the answer, with the tool results it ignored quoted after it.
    Append {
        answer: String,
        addition: String,
        trip: Trip,
    },
}

/// The Finalize reply checked: empty, an echo of `instruction` or a tool call as text is
/// not used; one that uses none of the turn's tool results gets them quoted after it.
pub(crate) fn check_final(
    text: String,
    instruction: &str,
    tools: &[&str],
    turn_messages: &[Message],
) -> FinalCheck {
    let said = buddys_words(turn_messages);
    if let Some(why) = rejected(&text, instruction, tools, &said) {
        return FinalCheck::Compose(composed(format!(
            "the final reply was not used: {why}; buddy wrote the answer from the tool results"
        )));
    }
    let results = successful_results(turn_messages);
    if results.is_empty() || results.iter().any(|(_, r)| mentions(&text, r)) {
        return FinalCheck::Use(text);
    }
    let addition = words::quoted_results_addition(&quote_results(&results));
    FinalCheck::Append {
        answer: format!("{}{addition}", text.trim_end()),
        addition,
        trip: composed("the final reply used none of the tool results; buddy quoted them after it"),
    }
}

/// The trip that says buddy wrote (part of) the answer, and why.
fn composed(detail: impl Into<String>) -> Trip {
    Trip::new(
        GuardKind::FinalAnswerCheck,
        GuardAction::ComposedAnswer,
        detail,
    )
}

/// A warning when tools were offered, none was ever called, and the reply writes a call
/// as text: the signature of a model server that ignores `tools` (llama-cpp-python
/// without `tool_choice`), which would otherwise end `completed` with no sign of it.
pub(crate) fn tools_ignored(
    text: &str,
    tools_offered: bool,
    tool_calls_so_far: u32,
    tools: &[&str],
) -> Option<Trip> {
    if !tools_offered || tool_calls_so_far > 0 || !looks_like_a_tool_call(text, tools) {
        return None;
    }
    Some(Trip::new(
        GuardKind::ToolsIgnored,
        GuardAction::Warned,
        format!(
            "{} tool(s) were offered, but the model wrote a tool call as text instead of making one: \
             the model server may be ignoring `tools`. `buddy doctor --provider NAME` checks it and \
             names the switch to set (llama-cpp-python needs `tool_choice_auto = true`)",
            tools.len()
        ),
    ))
}

/// Why a reply was a tool call written as text.
const CALL_AS_TEXT: &str = "it was a tool call written as text";

/// Why a reply cannot be the answer, if it cannot: it is empty, echoes or paraphrases
/// buddy's instruction or notes (`said`), or writes a tool call as text.
pub(crate) fn rejected(
    text: &str,
    instruction: &str,
    tools: &[&str],
    said: &Said<'_>,
) -> Option<&'static str> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Some("it was empty");
    }
    let lower = trimmed.to_lowercase();
    let normalized = normalize(trimmed);
    if lower.contains(Message::NOTE_MARK)
        || lower.contains(Message::LEGACY_NOTE_MARK)
        || words::INSTRUCTION_PHRASES.iter().any(|p| lower.contains(p))
        || text_similarity(&normalized, &normalize(instruction)) >= 0.4
    {
        return Some("it repeated buddy's own instruction");
    }
    if words::NOTE_PHRASES.iter().any(|p| lower.contains(p)) || paraphrases(&normalized, said) {
        return Some("it repeated buddy's own notes");
    }
    if looks_like_a_tool_call(trimmed, tools) {
        return Some(CALL_AS_TEXT);
    }
    None
}

/// Share of an answer's word pairs found in buddy's words above which the answer is
/// buddy's words told back (a paraphrase keeps most pairs; an answer that quotes one
/// phrase among its own does not).
const PARAPHRASE_SHARE: f64 = 0.5;

/// True when most of the answer's word pairs are buddy's own phrasing: pairs of its
/// notes that are not also the turn's facts.
fn paraphrases(normalized_answer: &str, said: &Said<'_>) -> bool {
    let pairs = |text: &str| -> std::collections::HashSet<(String, String)> {
        let words: Vec<String> = text
            .split(|c: char| !c.is_alphanumeric() && c != '#')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect();
        words
            .windows(2)
            .map(|w| (w[0].clone(), w[1].clone()))
            .collect()
    };
    let answer = pairs(normalized_answer);
    if answer.len() < 4 || said.notes.is_empty() {
        return false;
    }
    let facts: std::collections::HashSet<(String, String)> = said
        .facts
        .iter()
        .flat_map(|s| pairs(&normalize(s)))
        .collect();
    let buddy: std::collections::HashSet<(String, String)> = said
        .notes
        .iter()
        .flat_map(|s| pairs(&normalize(s)))
        .filter(|p| !facts.contains(p))
        .collect();
    let shared = answer.iter().filter(|p| buddy.contains(*p)).count();
    shared as f64 / answer.len() as f64 >= PARAPHRASE_SHARE
}

/// True for text that is a tool call in disguise: JSON naming a function and its
/// arguments, a chat template's tool-call markup, or `tool_name(...)` / `function.tool_name:`.
pub(crate) fn looks_like_a_tool_call(text: &str, tools: &[&str]) -> bool {
    let lower = text.to_lowercase();
    // Chat templates' tool-call markup, whole: `<function-thoughts>` or a `<function>`
    // word in prose is not a call (Llama 3 agents write their reasoning in such tags).
    const MARKUP: [&str; 10] = [
        "<tool_call>",
        "<tool_call ",
        "<tool_calls>",
        "<function=",
        "<function>",
        "<function name=",
        "<function_calls>",
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
    // `function.name: {…}` / `functions.name(…)`, whatever the name (small models invent
    // them); a name alone is a name mentioned, not a call made.
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
        start
            .strip_prefix(tool.to_lowercase().as_str())
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
    let results = successful_results(turn_messages);
    let quoted = (!results.is_empty()).then(|| quote_results(&results));
    words::fallback_answer(reason, quoted.as_deref())
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
        let instruction = words::finalize_instruction("a loop was detected");
        let tools = ["get_time", "list_dir"];
        let rejected = |t: &str| rejected(t, &instruction, &tools, &Said::default());
        assert_eq!(rejected("  \n"), Some("it was empty"));
        assert_eq!(
            rejected(&instruction),
            Some("it repeated buddy's own instruction")
        );
        assert_eq!(
            rejected("Tool use has ended for this turn. I will give my final answer."),
            Some("it repeated buddy's own instruction")
        );
        // A small model's echo of the Finalize instruction's own words.
        assert_eq!(
            rejected(
                "You can use the list of tools without them. Using only the conversation and tool results above, I answer."
            ),
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
        assert_eq!(
            rejected("The deploy is green: 12 of 12 checks passed."),
            None
        );
        assert_eq!(rejected("The function.py module defines it."), None);
        // Named, not called: reasoning tags and a tool's name in prose are answers.
        for answer in [
            "<function-thoughts>I found it.</function-thoughts>\n<answer>2024-06-10 13:00</answer>",
            "The difference is 1.0; I can use the `send_money` function to pay it.",
            "functions.get_time",
            "Use get_time when you need the hour.",
        ] {
            assert_eq!(rejected(answer), None, "{answer}");
        }
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
    fn an_answer_that_tells_buddys_notes_back_is_no_answer() {
        let note = "[system note] `pipeline_status` was called again with the same arguments; it was not run again \
                    and its earlier result was returned. Use it, or answer the user.";
        let said = Said {
            notes: vec![note],
            facts: vec![
                r#"{"path":"poems/haiku.txt"}"#,
                r#"wrote {"path":"poems/haiku.txt"}"#,
            ],
        };
        let no = |t: &str| rejected(t, "", &[], &said);
        assert_eq!(
            no(
                "The pipeline status was called again with the same arguments; it was not run again and \
                its earlier result was returned, so I will use it."
            ),
            Some("it repeated buddy's own notes")
        );
        // A small model's paraphrase of a no-progress note.
        assert_eq!(
            no("I think the answer is available (3 rounds in a row) and nothing changed."),
            Some("it repeated buddy's own notes")
        );
        // An answer that mentions the tool and its result is an answer.
        assert_eq!(
            no("The deploy pipeline is green: 12 of 12 checks passed, as pipeline_status said."),
            None
        );
        // A small model taking a note for someone who spoke to it is telling the note back.
        for echo in [
            "Thanks for the system note! You say 2 of 6 model calls left in this turn, so I will hurry.",
            "The warning from the user says calling it this way again will not bring anything new.",
        ] {
            let said = Said {
                notes: vec![
                    "[system note] 2 of 6 model calls left in this turn; the last is reserved for answering.",
                    "[system note] `search` was called with the same arguments and returned the same result 5 times. \
                     Calling it this way again will not bring anything new; use what is there, try something else, \
                     or answer the user.",
                ],
                facts: Vec::new(),
            };
            assert_eq!(
                rejected(echo, "", &[], &said),
                Some("it repeated buddy's own notes"),
                "{echo}"
            );
        }
    }
}
