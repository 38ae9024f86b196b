//! Every sentence buddy sends the model, each written once: its notes (which start with
//! [`Message::NOTE_MARK`], short and impersonal: a note never speaks as the user or as
//! someone the model should answer), the Finalize instruction, the results of calls it did not
//! run, its answers to approvals, and the answer it writes itself when the model gave
//! none. The answer checks read these too, to tell buddy's words from the model's.

use buddy_core::{Message, StopReason};

/// The Finalize instruction (one last call without tools); `detail` says why tool use ended.
pub(crate) fn finalize_instruction(detail: &str) -> String {
    format!(
        "{FINALIZE_START} ({detail}). Do not call any tools. Using only the conversation and tool \
         results above, give the user your final answer now. If something could not be done, say so \
         briefly."
    )
}

/// How the Finalize instruction begins.
pub(crate) const FINALIZE_START: &str = "[system note] Tool use has ended for this turn";

/// Phrases of buddy's own instructions that never belong in an answer.
pub(crate) const INSTRUCTION_PHRASES: [&str; 3] = [
    "tool use has ended",
    "do not call any tools",
    "using only the conversation and tool results",
];

/// Phrases only buddy's own notes use: an answer that carries one tells buddy's notes
/// back instead of answering. (Phrases a model may fairly use to explain what happened
/// to a call — "not run", "withdrawn" — are not among them.)
pub(crate) const NOTE_PHRASES: [&str; 7] = [
    "rounds in a row",
    "model calls left",
    "reserved for answering",
    "was not run again",
    "earlier result was returned",
    "will not bring anything new",
    "calling it this way again",
];

/// Why a reply is asked for again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unanswered {
    /// Empty, or only reasoning.
    Empty,
    /// Cut by the model's output limit before any answer.
    CutOff,
    /// buddy's own notes or instructions instead of an answer.
    BuddysWords,
    /// A tool call written as text instead of made.
    CallAsText,
}

/// The note that asks the model again for an answer.
pub(crate) fn reask_note(why: Unanswered) -> &'static str {
    match why {
        Unanswered::Empty => {
            "[system note] The last reply was empty. Answer the user now from the conversation and the tool \
             results above; call a tool only if one is still needed."
        }
        Unanswered::CutOff => {
            "[system note] The last reply was cut off by the length limit before it said anything. Answer the \
             user now, briefly."
        }
        Unanswered::BuddysWords => {
            "[system note] The last reply repeated these notes instead of answering. Answer the user's \
             question from the tool results above."
        }
        Unanswered::CallAsText => {
            "[system note] The last reply wrote a tool call as text instead of making it. Make the call \
             through the tools offered, or answer the user in plain words."
        }
    }
}

/// What the model reads when a person gives a capped turn more budget.
pub(crate) const CONTINUE_NOTE: &str = "[system note] This task was given more budget. Continue \
     where the work stopped; the results above are still valid, so do not repeat calls already made.";

/// A reply cut by the output token limit is asked to go on.
pub(crate) const CONTINUE_CUT_NOTE: &str = "[system note] The reply above was cut off by the output \
     length limit. Continue it exactly where it stopped, without repeating any of it.";

/// "N of M model calls left", once half the budget is spent.
pub(crate) fn budget_note(left: u32, max: u32) -> String {
    format!(
        "[system note] {left} of {max} model calls left in this turn; the last is reserved for answering."
    )
}

/// The latest reply asked for more calls than one reply may have.
pub(crate) fn dropped_calls_note(dropped: usize, max_per_reply: u32) -> String {
    format!(
        "[system note] The last reply asked for {dropped} more tool calls than the {max_per_reply} one reply \
         may have; those were not run. Ask for fewer at a time."
    )
}

/// A repeat of a `pure` or `effectful` skill, answered from its earlier result.
pub(crate) fn earlier_result_note(name: &str) -> String {
    format!(
        "[system note] `{name}` was called again with the same arguments; it was not run again and its \
         earlier result was returned. Use it, or answer the user."
    )
}

/// A tool's question nobody could answer (an unattended turn), for the person and the
/// model alike: what was asked, and the setting that answered `action` instead.
pub(crate) fn unattended_elicitation(
    server: &str,
    message: &str,
    fields: &[&str],
    action: &str,
    setting: &str,
) -> String {
    let fields = match fields {
        [] => String::new(),
        names => format!(" (fields: {})", names.join(", ")),
    };
    format!(
        "MCP server `{server}` asked the person {}{fields}, but nobody was there to answer \
         (this turn runs unattended): buddy answered `{action}`, as the setting \
         `unattended_elicitation = \"{setting}\"` says",
        excerpt(message, 200)
    )
}

/// The model's note after call `call_id`'s result about a question nobody answered.
pub(crate) fn unattended_elicitation_note(call_id: &str, what: &str) -> String {
    format!(
        "[system note] While call `{call_id}` ran, {what}. If the values it asked for matter, \
         tell the user what is missing."
    )
}

/// The same answer text came again beside new calls.
pub(crate) const REPEATED_ANSWER_NOTE: &str = "[system note] This answer text is the same as in an \
     earlier round. If the answer is complete, give it without calling tools.";

/// A loop signal about a call that ran: `what` says what was seen (with the evidence);
/// `left`, when known, how many more such calls end tool use for the turn.
pub(crate) fn loop_warning_note(what: &str, left: Option<u32>) -> String {
    let end = match left {
        Some(1) => {
            " If it is called this way once more with nothing new, tool use ends for this turn."
                .to_owned()
        }
        Some(n) => format!(
            " If it is called this way {n} more times with nothing new, tool use ends for this turn."
        ),
        None => String::new(),
    };
    format!(
        "[system note] {what}. Calling it this way again will not bring anything new; use what is there, \
         change the call or what it depends on, try something else, or answer the user.{end}"
    )
}

/// `text` on one line, quoted, cut to `max` characters: a result named as evidence.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() {
        return "(empty)".to_owned();
    }
    if flat.chars().count() <= max {
        return format!("\"{flat}\"");
    }
    let cut: String = flat.chars().take(max).collect();
    format!("\"{cut}…\"")
}

/// Skills withdrawn by a loop guard.
pub(crate) fn withdrawn_note(names: &[String], what: &str) -> String {
    let listed: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    let verb = if names.len() == 1 { "is" } else { "are" };
    format!(
        "[system note] {} {verb} withdrawn for the rest of this turn: {what}. Answer with what is there, or \
         use another tool.",
        listed.join(", ")
    )
}

/// A skill withdrawn by the circuit breaker.
pub(crate) fn circuit_breaker_note(name: &str, failures: u32) -> String {
    format!(
        "[system note] `{name}` failed {failures} times in a row and is withdrawn for the rest of this turn; \
         answer with what is there."
    )
}

/// A person changed a call's arguments before it ran.
pub(crate) fn edited_call_note(name: &str, id: &str, arguments: &str) -> String {
    format!(
        "{} The user changed the arguments of your `{name}` call ({id}) before it ran; it ran with: \
         {arguments}",
        Message::NOTE_MARK
    )
}

/// The result of an agent call a crash left open while its sub-agents waited on tasks:
/// what those tasks returned when waited on again (the sub-agents' turns are gone).
pub(crate) fn resumed_agent_tasks(
    agent: &str,
    results: &[(String, buddy_core::ToolOutcome)],
) -> String {
    let lines: Vec<String> = results
        .iter()
        .map(|(tool, outcome)| {
            let failed = if outcome.is_error { " (failed)" } else { "" };
            format!("- `{tool}`{failed}: {}", outcome.content)
        })
        .collect();
    format!(
        "`{agent}` was interrupted by a restart while its tools ran; buddy waited again on \
         the tasks they had become, and they returned (its own answer is lost; ask it again \
         if you need more):\n{}",
        lines.join("\n")
    )
}

/// Why a call was not run, as its result reads: the model sees these as error results.
pub(crate) mod not_run {
    /// A loop was detected and the final answer is being asked for.
    pub(crate) const LOOP_FINAL: &str =
        "not run: a loop was detected and the final answer is being asked for";

    /// `finish` without a usable answer.
    pub(crate) const FINISH_ARGS: &str =
        "`finish` needs arguments {\"answer\": \"<your final answer>\"} with a non-empty answer";

    /// The turn's tool-call limit is reached.
    pub(crate) fn tool_limit(max: u32) -> String {
        format!("not run: this turn's limit of {max} tool calls is reached")
    }

    /// A call to a skill withdrawn earlier in the turn.
    pub(crate) fn withdrawn(name: &str, why: &str) -> String {
        format!(
            "not run: `{name}` is no longer available in this turn ({why}); answer with what you have"
        )
    }

    /// A call still running when another call of its round failed fatally.
    pub(crate) const SIBLING_FAILED: &str =
        "not finished: another call of this round failed fatally, and the turn ends";

    /// A call made while no tools are offered.
    pub(crate) const NO_TOOLS: &str =
        "not run: no tools are offered now; answer with what you have";

    /// The per-skill limit withdrew it just now.
    pub(crate) fn skill_limit(name: &str, why: &str) -> String {
        format!("not run: `{name}` is withdrawn: {why}; answer with what you have")
    }

    /// A repeat of a skill already answered from its earlier result.
    pub(crate) fn repeat_withdrawn(name: &str) -> String {
        format!(
            "not run: `{name}` was called again with the same arguments, so it is withdrawn for the \
             rest of this turn; its earlier result is above"
        )
    }

    /// The same answer text kept coming with new calls.
    pub(crate) fn repeated_answer(what: &str, name: &str) -> String {
        format!(
            "not run: {what}, so `{name}` is withdrawn for the rest of this turn. If your answer is \
             complete, give it without calling tools."
        )
    }

    /// The same call earlier in the response did not finish.
    pub(crate) const SAME_CALL_UNFINISHED: &str =
        "not finished: the same call above did not finish";
    /// The turn was cancelled while the call ran.
    pub(crate) const CANCELLED: &str = "not finished: the turn was cancelled";
    /// The turn's deadline passed while the call ran.
    pub(crate) const DEADLINE: &str = "not finished: the turn's deadline passed";
    /// The toolbox lost a result (a bug).
    pub(crate) const MISSING: &str = "internal error: the tool result went missing";
    pub(crate) const TREE_TOOL_CALLS: &str = "not run: the tool calls this turn and its sub-agents share are used up; answer from the results so far";
    /// A call left open when the conversation went on.
    pub(crate) const INTERRUPTED: &str = "not finished: the turn was interrupted (or the call was still \
         waiting for approval) when the conversation went on";

    /// A person rejected the call.
    pub(crate) fn rejected(reason: Option<&str>) -> String {
        match reason.map(str::trim).filter(|r| !r.is_empty()) {
            Some(reason) => format!("not run: the user rejected this call: {reason}"),
            None => "not run: the user rejected this call".to_owned(),
        }
    }

    /// A call nobody could approve.
    pub(crate) fn unattended(name: &str) -> String {
        format!(
            "not run: `{name}` needs a person's approval and nobody can give it in this run, so it is \
             no longer offered; do the task without it (for example, give the text in your answer \
             instead of writing a file)"
        )
    }
}

/// The `finish` tool: its description and the result its call gets.
pub(crate) const FINISH_DESCRIPTION: &str =
    "Call this once you have the final answer for the user; it ends the turn.";
pub(crate) const FINISH_ANSWER_DESCRIPTION: &str = "The final answer for the user.";
pub(crate) const FINISH_ACK: &str = "Turn finished with this answer.";

/// Context trimming: the note that earlier messages were left out.
pub(crate) fn elision_note(dropped: usize) -> String {
    format!("[system note] {dropped} earlier message(s) were left out to fit the context window.")
}

/// How the marker of a result cut to fit begins (it stands between the head and the tail).
pub(crate) const CUT_MARKER: &str = "\n[system note: this result was cut from about";

/// The marker that stands where the middle of a result cut to fit was.
pub(crate) fn cut_marker(tokens: usize, target: usize) -> String {
    format!(
        "{CUT_MARKER} {tokens} to {target} tokens to fit the context window; its start and its end \
         are kept]\n"
    )
}

/// What stands for a result left out whole to fit the context window.
pub(crate) fn left_out_marker(tokens: usize) -> String {
    format!("[system note: a result of about {tokens} tokens, left out to fit the context window]")
}

/// buddy's own answer when the model gave none: why, and the latest results quoted.
pub(crate) fn fallback_answer(reason: StopReason, quoted: Option<&str>) -> String {
    let why = match reason {
        StopReason::Completed | StopReason::FinishTool | StopReason::NoAnswer => {
            "the model gave no answer text".to_owned()
        }
        other => format!("the turn stopped: {other}"),
    };
    match quoted {
        None => format!("I could not produce an answer ({why}), and no tool returned a result."),
        Some(quoted) => {
            format!(
                "I could not produce a final answer ({why}). What the tools returned:\n{quoted}"
            )
        }
    }
}

/// What buddy adds after a final answer that used none of the tool results.
pub(crate) fn quoted_results_addition(quoted: &str) -> String {
    format!("\n\nWhat the tools returned:\n{quoted}")
}

/// What an MCP server is told when buddy refuses its sampling request because the
/// running turn's budget is spent (the server may pass it on to the model).
pub(crate) fn sampling_refused(limit: &str) -> String {
    format!(
        "buddy refused the sampling request: {limit}; it draws from the same budget as the turn \
         that called the tool"
    )
}
