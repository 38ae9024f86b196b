//! Renders a turn's events for people (text on stdout, one readable line per tool call,
//! result and guard on stderr) or for programs (one JSON object per line).

use std::io::Write;

use buddy_core::{ChatEvent, Evidence, GuardAction, GuardKind};

/// Longest piece of a tool result or arguments shown on one human line.
const SHOWN_CHARS: usize = 160;

/// `text` with its runs of whitespace made single spaces, cut at [`SHOWN_CHARS`]; reads
/// only what it shows (a tool call's arguments can be megabytes).
fn one_line(text: &str) -> String {
    let mut flat = String::new();
    let mut chars = 0;
    for word in text.split_whitespace() {
        if chars > SHOWN_CHARS {
            break;
        }
        if chars > 0 {
            flat.push(' ');
            chars += 1;
        }
        // Enough of the word to pass the cut; the rest is never shown.
        let room = SHOWN_CHARS + 1 - chars.min(SHOWN_CHARS + 1);
        let end = word
            .char_indices()
            .nth(room)
            .map_or(word.len(), |(at, _)| at);
        flat.push_str(&word[..end]);
        chars += word[..end].chars().count();
    }
    if chars > SHOWN_CHARS {
        let cut: String = flat.chars().take(SHOWN_CHARS).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// The stderr line a person sees for an event; `None` for text (which goes to stdout).
pub fn human_line(event: &ChatEvent) -> Option<String> {
    Some(match event {
        ChatEvent::TextDelta { .. } | ChatEvent::IterationStats { .. } => return None,
        ChatEvent::ToolCallStart {
            name, arguments, ..
        } => format!("→ {name} {}", one_line(arguments)),
        ChatEvent::ToolCallResult {
            name,
            content,
            is_error,
            ..
        } => {
            let mark = if *is_error { "✗" } else { "←" };
            format!("{mark} {name}: {}", one_line(content))
        }
        ChatEvent::ToolPolling {
            name,
            check,
            wait_ms,
            waited_ms,
            ..
        } => format!(
            "… {name}: the same result as before; buddy checks again in {:.1} s (check {check}, {:.0} s waited, no model call)",
            *wait_ms as f64 / 1000.0,
            *waited_ms as f64 / 1000.0
        ),
        ChatEvent::ToolProgress {
            name,
            progress,
            total,
            message,
            status,
            ..
        } => progress_line(
            name,
            *progress,
            *total,
            message.as_deref(),
            status.as_deref(),
        ),
        ChatEvent::ToolSampling {
            name,
            server,
            model,
            input_tokens,
            output_tokens,
            refused,
            ..
        } => match refused {
            Some(why) => {
                format!("✗ {name}: `{server}` asked buddy's model for a completion: {why}")
            }
            None => format!(
                "↺ {name}: `{server}` asked buddy's model for a completion ({}, {input_tokens} tokens in, {output_tokens} out; counted in this turn)",
                model.as_deref().unwrap_or("model")
            ),
        },
        ChatEvent::GuardTripped {
            guard,
            action,
            skill,
            detail,
            evidence,
        } => guard_line(guard, action, skill.as_deref(), detail, evidence),
        ChatEvent::Done { reason, stats, .. } => done_line(reason, stats),
        ChatEvent::Error {
            reason,
            message,
            stats,
        } => format!(
            "■ error: {reason}: {message} ({}, {})",
            count(stats.model_calls, "model call"),
            count(stats.tool_calls, "tool call")
        ),
        ChatEvent::ElicitationResolved {
            unattended: Some(what),
            ..
        } => format!("? {what}"),
        ChatEvent::ApprovalRequired { calls } => {
            let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
            format!(
                "? approval needed for {} call(s): {}",
                calls.len(),
                names.join(", ")
            )
        }
        // A sub-agent's steps, indented by depth under the agents that lead to it (its
        // text stays off stdout, which holds the top-level answer only).
        ChatEvent::Agent { path, event } => {
            let inner = human_line(event)?;
            let names: Vec<&str> = path.iter().map(|h| h.agent.as_str()).collect();
            format!("{}[{}] {inner}", "  ".repeat(path.len()), names.join(" › "))
        }
        _ => return None,
    })
}

/// A tool's progress: the task's status, how far it is, and its message.
fn progress_line(
    name: &str,
    progress: Option<f64>,
    total: Option<f64>,
    message: Option<&str>,
    status: Option<&str>,
) -> String {
    let mut parts = Vec::new();
    if let Some(status) = status {
        parts.push(format!("task {status}"));
    }
    match (progress, total) {
        (Some(done), Some(total)) => parts.push(format!("{done}/{total}")),
        (Some(done), None) => parts.push(format!("{done}")),
        _ => {}
    }
    if let Some(message) = message {
        parts.push(one_line(message));
    }
    format!("… {name}: {}", parts.join(" — "))
}

/// A guard's trip: which guard, on which skill, what it did, why, and the calls seen.
fn guard_line(
    guard: &GuardKind,
    action: &GuardAction,
    skill: Option<&str>,
    detail: &str,
    evidence: &[Evidence],
) -> String {
    let on = skill.map(|s| format!(" [{s}]")).unwrap_or_default();
    let calls: Vec<&str> = evidence.iter().map(|e| e.call_id.as_str()).collect();
    let seen = if calls.is_empty() {
        String::new()
    } else {
        format!(" (calls {})", calls.join(", "))
    };
    format!(
        "! guard {}{on}: {} — {detail}{seen}",
        guard.as_str(),
        action.as_str()
    )
}

/// The stop line of a turn that answered: its reason, calls, tokens (with the cache's
/// share), time and cost.
fn done_line(reason: &buddy_core::StopReason, stats: &buddy_core::TurnStats) -> String {
    format!(
        "■ stop: {reason} ({}, {}, {} tokens in{}, {} out, {} ms{})",
        count(stats.model_calls, "model call"),
        count(stats.tool_calls, "tool call"),
        stats.input_tokens,
        cache_words(stats),
        stats.output_tokens,
        stats.elapsed_ms,
        stats
            .cost_usd
            .map(|cost| format!(", {cost}"))
            .unwrap_or_default()
    )
}

/// The prompt cache's share of a turn's input (` (9000 read from cache, 1500 written)`),
/// or nothing when the turn used no cache.
fn cache_words(stats: &buddy_core::TurnStats) -> String {
    match (stats.cache_read_tokens, stats.cache_write_tokens) {
        (0, 0) => String::new(),
        (read, 0) => format!(" ({read} read from cache)"),
        (read, written) => format!(" ({read} read from cache, {written} written)"),
    }
}

/// `1 tool call`, `2 tool calls`.
fn count(n: u32, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Where a printer writes.
pub struct Printer<O: Write, E: Write> {
    pub json: bool,
    out: O,
    err: E,
    /// Whether stdout's last text ended without a newline.
    open_line: bool,
    /// Whether stdout has had any text this turn.
    wrote_text: bool,
    /// A model call ended since the last text: the next text starts a new round.
    new_round: bool,
    /// Sub-agents' labels (agent, number, task), from the calls that started them.
    labels: crate::agent_labels::AgentLabels,
}

impl<O: Write, E: Write> Printer<O, E> {
    /// A printer writing to `out` (answer text or JSON lines) and `err` (human lines).
    pub fn new(json: bool, out: O, err: E) -> Self {
        Printer {
            json,
            out,
            err,
            open_line: false,
            wrote_text: false,
            new_round: false,
            labels: crate::agent_labels::AgentLabels::default(),
        }
    }

    /// Prints one event. Write errors (a closed pipe) are ignored: the turn goes on.
    pub fn print(&mut self, event: &ChatEvent) {
        if self.json {
            // Written into a buffer of its size: a call's arguments can be megabytes.
            if let Ok(mut line) = buddy_core::json_exact(event, 1) {
                line.push(b'\n');
                let _ = self.out.write_all(&line);
                let _ = self.out.flush();
            }
            return;
        }
        if let ChatEvent::TextDelta { text } = event {
            // Each round's text is a paragraph of its own: one blank line between them.
            if self.new_round && self.wrote_text {
                let _ = write!(self.out, "{}", if self.open_line { "\n\n" } else { "\n" });
            }
            self.new_round = false;
            self.wrote_text |= !text.is_empty();
            let _ = write!(self.out, "{text}");
            let _ = self.out.flush();
            self.open_line = !text.ends_with('\n');
            return;
        }
        if matches!(event, ChatEvent::IterationStats { .. }) {
            self.new_round = true;
        }
        self.labels.observe(event);
        let line = match event {
            // A sub-agent's steps, indented by depth, under a label that tells parallel
            // children apart (their task, a number where they share an agent).
            ChatEvent::Agent { path, event } => human_line(event).map(|inner| {
                let label = self.labels.label(path);
                format!("{}[{label}] {inner}", "  ".repeat(path.len()))
            }),
            other => human_line(other),
        };
        if let Some(line) = line {
            if self.open_line {
                let _ = writeln!(self.out);
                let _ = self.out.flush();
                self.open_line = false;
            }
            let _ = writeln!(self.err, "{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use buddy_core::{StopReason, TurnStats};
    use proptest::prelude::*;

    /// What `one_line` showed when it flattened the whole text first.
    fn one_line_of_whole(text: &str) -> String {
        let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if flat.chars().count() > SHOWN_CHARS {
            let cut: String = flat.chars().take(SHOWN_CHARS).collect();
            format!("{cut}…")
        } else {
            flat
        }
    }

    proptest! {
        #[test]
        fn one_line_shows_what_flattening_the_whole_text_showed(
            text in "([a-zé€ ]|\\s|\n){0,400}"
        ) {
            prop_assert_eq!(one_line(&text), one_line_of_whole(&text));
        }
    }

    #[test]
    fn one_line_cuts_at_the_limit_exactly() {
        for n in [159, 160, 161, 162] {
            let text = "é".repeat(n);
            assert_eq!(one_line(&text), one_line_of_whole(&text), "{n}");
            let spaced = format!("  {}  x", "a ".repeat(n / 2));
            assert_eq!(one_line(&spaced), one_line_of_whole(&spaced), "{n}");
        }
    }

    #[test]
    fn text_goes_to_stdout_and_the_rest_to_stderr() {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        {
            let mut p = Printer::new(false, &mut out, &mut err);
            p.print(&ChatEvent::TextDelta { text: "Hi".into() });
            p.print(&ChatEvent::ToolCallStart {
                id: "c".into(),
                name: "get_time".into(),
                arguments: "{}".into(),
            });
            p.print(&ChatEvent::Done {
                reason: StopReason::Completed,
                answer: "Hi".into(),
                stats: TurnStats::default(),
            });
        }
        assert_eq!(String::from_utf8(out).unwrap(), "Hi\n");
        let err = String::from_utf8(err).unwrap();
        assert!(err.starts_with("→ get_time {}\n■ stop: completed"), "{err}");
    }

    #[test]
    fn progress_and_sampling_read_as_one_line_each() {
        let progress = |progress, total, message: Option<&str>, status: Option<&str>| {
            human_line(&ChatEvent::ToolProgress {
                id: "c1".into(),
                name: "db__export".into(),
                progress,
                total,
                message: message.map(str::to_owned),
                status: status.map(str::to_owned),
            })
        };
        assert_eq!(
            progress(Some(40.0), Some(300.0), Some("row 40"), None).as_deref(),
            Some("… db__export: 40/300 — row 40")
        );
        assert_eq!(
            progress(None, None, Some("copying rows"), Some("working")).as_deref(),
            Some("… db__export: task working — copying rows")
        );
        assert_eq!(
            progress(Some(0.5), None, None, None).as_deref(),
            Some("… db__export: 0.5")
        );
        let sampling = |refused: Option<&str>| {
            human_line(&ChatEvent::ToolSampling {
                id: "c1".into(),
                name: "db__export".into(),
                server: "db".into(),
                model: refused.is_none().then(|| "gpt-4o".to_owned()),
                input_tokens: 12,
                output_tokens: 5,
                cost_usd: None,
                refused: refused.map(str::to_owned),
            })
        };
        assert_eq!(
            sampling(None).as_deref(),
            Some(
                "↺ db__export: `db` asked buddy's model for a completion (gpt-4o, 12 tokens in, 5 out; counted in this turn)"
            )
        );
        assert_eq!(
            sampling(Some("buddy refused the sampling request: …")).as_deref(),
            Some(
                "✗ db__export: `db` asked buddy's model for a completion: buddy refused the sampling request: …"
            )
        );
    }

    #[test]
    fn the_stop_line_says_what_the_cache_read_and_wrote() {
        let done = |read, written| {
            human_line(&ChatEvent::Done {
                reason: buddy_core::StopReason::Completed,
                answer: String::new(),
                stats: buddy_core::TurnStats {
                    model_calls: 2,
                    input_tokens: 12_000,
                    output_tokens: 50,
                    cache_read_tokens: read,
                    cache_write_tokens: written,
                    ..buddy_core::TurnStats::default()
                },
            })
            .unwrap_or_default()
        };
        assert!(
            done(9_000, 1_500)
                .contains("12000 tokens in (9000 read from cache, 1500 written), 50 out"),
            "{}",
            done(9_000, 1_500)
        );
        assert!(done(9_000, 0).contains("(9000 read from cache), 50 out"));
        assert!(done(0, 0).contains("12000 tokens in, 50 out"));
    }

    fn stats() -> ChatEvent {
        ChatEvent::IterationStats {
            model_call: 1,
            finish_reason: None,
            tool_calls_requested: 1,
            tools_offered: 1,
            input_tokens: 0,
            output_tokens: 0,
            context_tokens: 0,
            context_window: 0,
            elapsed_ms: 0,
            cost_usd: None,
        }
    }

    #[test]
    fn each_rounds_text_is_a_paragraph_of_its_own() {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        {
            let mut p = Printer::new(false, &mut out, &mut err);
            // A silent round first: nothing to separate from.
            p.print(&stats());
            p.print(&ChatEvent::TextDelta {
                text: "Let me ".into(),
            });
            p.print(&ChatEvent::TextDelta {
                text: "look.".into(),
            });
            p.print(&stats());
            p.print(&ChatEvent::ToolCallStart {
                id: "c".into(),
                name: "find".into(),
                arguments: "{}".into(),
            });
            p.print(&ChatEvent::TextDelta {
                text: "Found it.\n".into(),
            });
            p.print(&stats());
            p.print(&ChatEvent::TextDelta {
                text: "Done.".into(),
            });
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Let me look.\n\nFound it.\n\nDone."
        );
    }
}
