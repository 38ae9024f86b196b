//! A recorded conversation of any agent (not only buddy's) as turns buddy can replay: each
//! user message opens a turn, as it would in buddy; a reply without calls that the agent
//! followed with more replies ends its turn there, and the next reply goes on in a turn of
//! its own. A log is repaired where buddy's history rules need it (results moved next to
//! their calls, reused call ids told apart, results with no call dropped), and every
//! repair is counted, so a judgement never rests on silently changed input.

use std::collections::{BTreeSet, HashMap};

use buddy_core::{Message, RepeatSemantics, ToolCall, ToolSpec};
use serde::{Deserialize, Serialize};

use crate::approval::ApprovalRules;
use crate::policy::LoopPolicy;
use crate::tape::{Recording, TAPE_VERSION, Tape, TapeCalls, TapeEntry, TapeStep, TapeTool};

/// The result given to a call whose result the log does not hold while the agent went on.
pub const NO_RESULT: &str = "(no result was recorded for this call)";

/// The user message that stands for a task given in the system prompt.
pub const TASK_IN_SYSTEM_PROMPT: &str = "(no user message: the task is in the system prompt)";

/// What was mended in a log before it could be replayed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repairs {
    /// Tool results that answer no call before them (dropped).
    pub orphan_results: u32,
    /// Calls the agent went on past without a result (given [`NO_RESULT`]).
    pub missing_results: u32,
    /// Call ids used more than once in the conversation (told apart by a suffix).
    pub reused_ids: u32,
    /// buddy's own notes and mid-conversation system messages (not replayed).
    pub dropped_messages: u32,
    /// The log had no user message (an agent given its task in the system prompt): one
    /// standing for the task was put after the system prompt, so the run is one turn.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub added_user_message: bool,
}

impl Repairs {
    /// True when nothing had to be mended.
    pub fn is_empty(&self) -> bool {
        *self == Repairs::default()
    }
}

/// One turn of a recorded conversation, ready to replay.
#[derive(Clone, Debug)]
pub struct LoggedTurn {
    pub recording: Recording,
    /// Index of the turn's first new message in the repaired conversation.
    pub starts_at: usize,
    /// The model replies the turn holds.
    pub replies: u32,
    /// The turn's last reply made calls: the log ends (or the next user message comes)
    /// before the agent answered.
    pub open: bool,
}

/// A recorded conversation cut into turns.
#[derive(Clone, Debug)]
pub struct LoggedConversation {
    pub turns: Vec<LoggedTurn>,
    pub repairs: Repairs,
    /// The repaired conversation the turns point into.
    pub messages: Vec<Message>,
}

/// The conversation `messages` of `model` as turns; `tools` are the tools the agent was
/// offered, if the log names them (else the tools it called, judged by their results).
pub fn turns_of(
    model: &str,
    messages: Vec<Message>,
    tools: &[ToolSpec],
    policy: &LoopPolicy,
) -> LoggedConversation {
    let (mut messages, mut repairs) = repaired(messages);
    if !messages.iter().any(Message::is_user) {
        let at = messages
            .iter()
            .position(|m| !matches!(m, Message::System { .. }))
            .unwrap_or(messages.len());
        messages.insert(at, Message::user(TASK_IN_SYSTEM_PROMPT));
        repairs.added_user_message = true;
    }
    let tools = tool_list(&messages, tools);
    let mut turns = Vec::new();
    let mut start: Option<(usize, bool)> = None;
    let mut i = 0;
    while i <= messages.len() {
        let boundary = match messages.get(i) {
            None => true,
            Some(Message::User { .. }) => true,
            // A reply with no calls followed by another reply: buddy would have ended
            // the turn at the first, and the next goes on in a turn of its own.
            Some(Message::Assistant { .. }) => {
                matches!(
                    messages.get(i.wrapping_sub(1)),
                    Some(Message::Assistant { tool_calls, .. }) if tool_calls.is_empty()
                ) && start.is_some()
            }
            _ => false,
        };
        if boundary {
            if let Some((from, with_user)) = start.take()
                && let Some(turn) =
                    logged_turn(model, &messages, from, i, with_user, &tools, policy)
            {
                turns.push(turn);
            }
            match messages.get(i) {
                Some(Message::User { .. }) => start = Some((i, true)),
                Some(Message::Assistant { .. }) => start = Some((i, false)),
                _ => {}
            }
        }
        i += 1;
    }
    LoggedConversation {
        turns,
        repairs,
        messages,
    }
}

/// The tools of the tape: those the log declares, and any other it called (an agent's
/// log may leave out a tool list, or the list may have changed).
fn tool_list(messages: &[Message], declared: &[ToolSpec]) -> Vec<TapeTool> {
    let mut names: BTreeSet<&str> = declared.iter().map(|t| t.name.as_str()).collect();
    let mut tools: Vec<TapeTool> = declared
        .iter()
        .map(|spec| TapeTool {
            spec: spec.clone(),
            semantics: RepeatSemantics::Observed,
            external: false,
        })
        .collect();
    for message in messages {
        if let Message::Assistant { tool_calls, .. } = message {
            for call in tool_calls {
                if names.insert(call.name.as_str()) {
                    tools.push(TapeTool {
                        spec: ToolSpec {
                            name: call.name.clone(),
                            description: String::new(),
                            parameters: serde_json::json!({"type": "object"}),
                        },
                        semantics: RepeatSemantics::Observed,
                        external: false,
                    });
                }
            }
        }
    }
    tools
}

/// The turn of `messages[from..to]` (opened by a user message when `with_user`), or
/// `None` when it holds no reply to judge.
fn logged_turn(
    model: &str,
    messages: &[Message],
    from: usize,
    to: usize,
    with_user: bool,
    tools: &[TapeTool],
    policy: &LoopPolicy,
) -> Option<LoggedTurn> {
    let new_messages = messages.get(from..to)?.to_vec();
    let mut steps = Vec::new();
    let mut replies = 0u32;
    let mut open = false;
    for (at, message) in new_messages.iter().enumerate() {
        match message {
            Message::Assistant {
                content,
                tool_calls,
            } => {
                replies += 1;
                open = !tool_calls.is_empty();
                steps.push(TapeStep::Reply {
                    purpose: buddy_core::CallPurpose::Turn,
                    text: content.clone().unwrap_or_default(),
                    calls: TapeCalls::Message(at),
                    finish: None,
                    usage: None,
                    chanted: None,
                });
            }
            Message::Tool {
                tool_call_id,
                is_error,
                ..
            } => steps.push(TapeStep::Result {
                call_id: tool_call_id.clone(),
                at,
                is_error: *is_error,
                fatal: false,
            }),
            _ => {}
        }
    }
    if replies == 0 {
        return None;
    }
    let tape = Tape {
        version: TAPE_VERSION,
        model: model.to_owned(),
        policy: policy.clone(),
        approval: ApprovalRules::default(),
        tools: tools.to_vec(),
        entry: TapeEntry::NewMessage {
            user_at: with_user.then_some(0),
        },
        given: from,
        steps,
        new_messages: new_messages.len(),
        ended: None,
        resumed: std::collections::BTreeMap::new(),
    };
    Some(LoggedTurn {
        recording: Recording {
            tape,
            history: messages[..from].to_vec(),
            new_messages,
        },
        starts_at: from,
        replies,
        open,
    })
}

/// `messages` as buddy's history rules want them: each reply's results right after it
/// (in the order of its calls), ids unique, no result without a call, buddy's notes and
/// mid-conversation system messages left out.
fn repaired(messages: Vec<Message>) -> (Vec<Message>, Repairs) {
    let mut repairs = Repairs::default();
    let mut used: HashMap<String, u32> = HashMap::new();
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    // The calls of the latest reply still waiting for results: (id as the log gave it,
    // id as buddy keeps it, result when it came).
    let mut waiting: Vec<(String, String, Option<Message>)> = Vec::new();
    // Messages that came between a reply and its results (kept after the results).
    let mut between: Vec<Message> = Vec::new();
    let mut seen_other = false;
    let flush = |out: &mut Vec<Message>,
                 waiting: &mut Vec<(String, String, Option<Message>)>,
                 between: &mut Vec<Message>,
                 repairs: &mut Repairs,
                 last: bool| {
        for (_, id, result) in waiting.drain(..) {
            match result {
                Some(result) => out.push(result),
                // A call at the very end of the log stays open: the run ended there.
                None if last && between.is_empty() => {}
                None => {
                    repairs.missing_results += 1;
                    out.push(Message::tool_result(id, NO_RESULT, false));
                }
            }
        }
        out.append(between);
    };
    for message in messages {
        match message {
            Message::Assistant {
                content,
                tool_calls,
            } => {
                flush(&mut out, &mut waiting, &mut between, &mut repairs, false);
                seen_other = true;
                let tool_calls: Vec<ToolCall> = tool_calls
                    .into_iter()
                    .map(|call| {
                        let count = used.entry(call.id.clone()).or_insert(0);
                        *count += 1;
                        let id = if *count == 1 && !call.id.is_empty() {
                            call.id.clone()
                        } else {
                            if *count > 1 {
                                repairs.reused_ids += 1;
                            }
                            format!("{}#{}", call.id, count)
                        };
                        waiting.push((call.id.clone(), id.clone(), None));
                        ToolCall { id, ..call }
                    })
                    .collect();
                out.push(Message::Assistant {
                    content,
                    tool_calls,
                });
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
            } => {
                // The first open call with this id; a result with no id (or an id no call
                // has) answers the first call still open only when nothing else fits.
                let slot = waiting
                    .iter()
                    .position(|(given, _, r)| r.is_none() && *given == tool_call_id)
                    .or_else(|| {
                        let known = waiting.iter().any(|(given, _, _)| *given == tool_call_id);
                        (tool_call_id.is_empty() && !known)
                            .then(|| waiting.iter().position(|(_, _, r)| r.is_none()))
                            .flatten()
                    });
                match slot {
                    Some(i) => {
                        let id = waiting[i].1.clone();
                        waiting[i].2 = Some(Message::Tool {
                            tool_call_id: id,
                            content,
                            is_error,
                        });
                    }
                    None => repairs.orphan_results += 1,
                }
            }
            Message::Note { .. } => repairs.dropped_messages += 1,
            Message::System { .. } if seen_other => repairs.dropped_messages += 1,
            other => {
                if waiting.is_empty() {
                    seen_other |= !matches!(other, Message::System { .. });
                    out.push(other);
                } else {
                    seen_other = true;
                    between.push(other);
                }
            }
        }
    }
    flush(&mut out, &mut waiting, &mut between, &mut repairs, true);
    (out, repairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall::new(id, name, "{}")
    }

    fn calls(ids: &[&str]) -> Message {
        Message::Assistant {
            content: None,
            tool_calls: ids.iter().map(|id| call(id, "t")).collect(),
        }
    }

    #[test]
    fn results_join_their_calls_and_orphans_are_dropped() {
        let log = vec![
            Message::system("s"),
            Message::user("u"),
            calls(&["a", "b"]),
            Message::user("hurry"),
            Message::tool_result("b", "B", false),
            Message::tool_result("zz", "?", false),
            Message::tool_result("a", "A", false),
            Message::assistant("done"),
        ];
        let (out, repairs) = repaired(log);
        assert_eq!(repairs.orphan_results, 1);
        assert_eq!(
            out[3..6],
            [
                Message::tool_result("a", "A", false),
                Message::tool_result("b", "B", false),
                Message::user("hurry")
            ]
        );
        crate::history_check::check_history(&out).unwrap();
    }

    #[test]
    fn reused_ids_are_told_apart_and_missing_results_filled_except_at_the_end() {
        let log = vec![
            Message::user("u"),
            calls(&["c"]),
            Message::tool_result("c", "1", false),
            calls(&["c", ""]),
            Message::tool_result("c", "2", false),
            calls(&["c"]),
        ];
        let (out, repairs) = repaired(log);
        assert_eq!(repairs.reused_ids, 2);
        assert_eq!(repairs.missing_results, 1);
        let Message::Assistant { tool_calls, .. } = &out[3] else {
            panic!("{out:?}")
        };
        assert_eq!(tool_calls[0].id, "c#2");
        assert_eq!(out[4], Message::tool_result("c#2", "2", false));
        assert_eq!(out[5], Message::tool_result("#1", NO_RESULT, false));
        // The last reply's call stays open: the run ended there.
        assert_eq!(out.len(), 7);
    }

    #[test]
    fn each_user_message_opens_a_turn_and_an_answer_followed_by_a_reply_ends_one() {
        let log = vec![
            Message::system("s"),
            Message::assistant("Hi, how can I help?"),
            Message::user("book a flight"),
            calls(&["a"]),
            Message::tool_result("a", "ok", false),
            Message::assistant("Which date?"),
            Message::assistant("Let me look again."),
            calls(&["b"]),
            Message::tool_result("b", "ok", false),
            Message::user("thanks"),
            Message::user("bye"),
            calls(&["c"]),
        ];
        let conversation = turns_of("m", log, &[], &LoopPolicy::default());
        let shape: Vec<(usize, u32, bool)> = conversation
            .turns
            .iter()
            .map(|t| (t.starts_at, t.replies, t.open))
            .collect();
        assert_eq!(
            shape,
            [(2, 2, false), (6, 1, false), (7, 1, true), (10, 1, true)]
        );
        let first = &conversation.turns[0].recording;
        assert_eq!(first.history.len(), 2);
        assert_eq!(first.tape.entry, TapeEntry::NewMessage { user_at: Some(0) });
        assert_eq!(
            conversation.turns[1].recording.tape.entry,
            TapeEntry::NewMessage { user_at: None }
        );
        assert_eq!(first.tape.tools.len(), 1);
    }
}
